// Striping of a message's chunks over a rank's rails (endpoints on one or several NICs/domains).
// Both sides compute the same mapping from (user tag, chunk), so no control message is needed:
// chunk c goes on rail (c + userTag) % rails; each rail carries its chunks in increasing order.
#pragma once

#include <cstddef>
#include <cstdint>

namespace conflux::ofi {

/// Chunk size of a `bytes` message: `chunkBytes`, grown so the message needs at most kMaxChunks chunks,
/// never above the provider's max message size.
size_t chunkSizeFor(size_t bytes, size_t chunkBytes, size_t maxMsgSize);
/// Number of chunks (at least 1: a 0-byte message is one empty chunk).
uint32_t chunkCount(size_t bytes, size_t chunkSize);
/// Rail offset of a message: chunk c travels on rail (c + offset) % rails.
uint32_t railOffset(uint64_t userTag, int rails);
/// First chunk carried by `rail`, or `nchunks` when the rail carries none.
uint32_t firstChunkOnRail(int rail, int rails, uint32_t offset, uint32_t nchunks);

}  // namespace conflux::ofi
