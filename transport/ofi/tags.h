// 64-bit libfabric tags. Every tagged message carries (source rank, user tag, chunk):
//
//   63..60  reserved, always 0 (some providers keep the top bits for themselves)
//   59..40  source rank (20 bits): receives match on it even where the provider lacks FI_DIRECTED_RECV
//   39..12  user tag (28 bits), by convention (communicator id: 12 bits, sequence: 16 bits)
//   11..0   chunk index of a large message (12 bits; the chunk size grows so that no message needs more)
//
// Receives match exactly (ignore bits 0), so two messages differ in tag unless they have the same source,
// user tag and chunk; those are matched in the order they were posted on both sides.
#pragma once

#include <cstdint>

namespace conflux::ofi {

inline constexpr int kChunkBits = 12;
inline constexpr int kUserTagBits = 28;
inline constexpr int kRankBits = 20;
inline constexpr uint32_t kMaxChunks = 1u << kChunkBits;
inline constexpr uint64_t kMaxUserTag = (uint64_t{1} << kUserTagBits) - 1;
inline constexpr int kMaxRanks = 1 << kRankBits;

/// User tag from a communicator id (low 12 bits kept) and a sequence number (low 16 bits kept).
constexpr uint64_t makeUserTag(uint32_t commId, uint32_t seq) {
  return (uint64_t(commId & 0xfffu) << 16) | (seq & 0xffffu);
}

/// Tag on the wire for chunk `chunk` of a message from `srcRank` with `userTag`.
constexpr uint64_t wireTag(int srcRank, uint64_t userTag, uint32_t chunk) {
  return (uint64_t(uint32_t(srcRank)) << (kUserTagBits + kChunkBits)) |
         ((userTag & kMaxUserTag) << kChunkBits) | (chunk & (kMaxChunks - 1));
}

constexpr int wireTagSource(uint64_t tag) { return int((tag >> (kUserTagBits + kChunkBits)) & (kMaxRanks - 1)); }
constexpr uint64_t wireTagUser(uint64_t tag) { return (tag >> kChunkBits) & kMaxUserTag; }
constexpr uint32_t wireTagChunk(uint64_t tag) { return uint32_t(tag & (kMaxChunks - 1)); }

}  // namespace conflux::ofi
