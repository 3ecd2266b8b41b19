// 64-bit libfabric tags. Every tagged message carries (source rank, user tag, chunk):
//
//   63..60  reserved, always 0 (some providers keep the top bits for themselves)
//   59..40  source rank (20 bits): receives match on it even where the provider lacks FI_DIRECTED_RECV
//   39..12  user tag (28 bits): tag space (4 bits, see below), then 24 bits the caller chooses; by
//           convention a message id (12 bits) and a call sequence number (12 bits), see makeUserTag
//   11..0   chunk index of a large message (12 bits; the chunk size grows so that no message needs more)
//
// Receives match exactly (ignore bits 0), so two messages differ in tag unless they have the same source,
// user tag and chunk; those are matched in the order they were posted on both sides.
//
// Tag spaces let several communicators share one Transport (cfxCommSplit children reuse their parent's
// endpoints): each communicator sending through a shared Transport owns one of 16 spaces, the same on
// all its ranks, and a CommNet puts it in the top 4 bits of every user tag it posts. Space 0 is the
// communicator that opened the Transport.
#pragma once

#include <cstdint>

namespace conflux::ofi {

inline constexpr int kChunkBits = 12;
inline constexpr int kUserTagBits = 28;
inline constexpr int kRankBits = 20;
inline constexpr uint32_t kMaxChunks = 1u << kChunkBits;
inline constexpr uint64_t kMaxUserTag = (uint64_t{1} << kUserTagBits) - 1;
inline constexpr int kMaxRanks = 1 << kRankBits;

inline constexpr int kTagSpaceBits = 4;
inline constexpr int kMaxTagSpaces = 1 << kTagSpaceBits;
inline constexpr int kSpaceTagBits = kUserTagBits - kTagSpaceBits;
/// The largest tag a communicator passes to a CommNet (the space takes the bits above it).
inline constexpr uint64_t kMaxSpaceTag = (uint64_t{1} << kSpaceTagBits) - 1;

/// A tag within a space from a message id (low 12 bits kept) and a sequence number (low 12 bits kept).
constexpr uint64_t makeUserTag(uint32_t id, uint32_t seq) {
  return (uint64_t(id & 0xfffu) << 12) | (seq & 0xfffu);
}

/// The user tag on the Transport of `tag` (<= kMaxSpaceTag) sent in tag space `space`.
constexpr uint64_t spaceTag(uint32_t space, uint64_t tag) {
  return (uint64_t(space & (kMaxTagSpaces - 1)) << kSpaceTagBits) | (tag & kMaxSpaceTag);
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
