#include "transport/ofi/rails.h"

#include "transport/ofi/tags.h"

namespace conflux::ofi {

size_t chunkSizeFor(size_t bytes, size_t chunkBytes, size_t maxMsgSize) {
  size_t size = chunkBytes ? chunkBytes : 1;
  const size_t minForCount = (bytes + kMaxChunks - 1) / kMaxChunks;
  if (size < minForCount) size = minForCount;
  if (maxMsgSize != 0 && size > maxMsgSize) size = maxMsgSize;
  return size;
}

uint32_t chunkCount(size_t bytes, size_t chunkSize) {
  if (bytes == 0) return 1;
  return uint32_t((bytes + chunkSize - 1) / chunkSize);
}

uint32_t railOffset(uint64_t userTag, int rails) { return rails <= 1 ? 0 : uint32_t(userTag % uint64_t(rails)); }

uint32_t firstChunkOnRail(int rail, int rails, uint32_t offset, uint32_t nchunks) {
  if (rails <= 1) return rail == 0 ? 0 : nchunks;
  // Smallest c >= 0 with (c + offset) % rails == rail.
  const uint32_t c = uint32_t((rail + rails - int(offset % uint32_t(rails))) % rails);
  return c < nchunks ? c : nchunks;
}

}  // namespace conflux::ofi
