// Memory that peer processes can map: the library's allocator (cfxMemAlloc) and the per-communicator
// cache of peers' mappings.
//
// Each allocation is its own memfd, mapped MAP_SHARED and populated. The descriptor stays open while the
// block lives, so a peer on the same node can open it as /proc/<pid>/fd/<fd> (same user; no file name
// exists, so nothing is left behind when a process dies) and map the same pages. Direct algorithms
// (algorithms/direct.cc) then read and write every rank's own buffers with no staging copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>

namespace conflux::shm {

/// One block of peer-mappable memory.
struct SharedBlock {
  uint64_t id = 0;           ///< Unique within the process (never reused).
  int fd = -1;               ///< The memfd, open while the block lives.
  std::byte* base = nullptr;
  size_t bytes = 0;          ///< Mapped length (a whole number of pages).
};

/// Allocates `bytes` (> 0) of peer-mappable memory, zero-filled and populated. Throws Error.
void* sharedAlloc(size_t bytes);
/// Frees a block from sharedAlloc; false when `p` is not the start of one (nothing is freed).
bool sharedFree(void* p);
/// The block that holds all of [p, p + bytes), if any.
std::optional<SharedBlock> findShared(const void* p, size_t bytes);

/// Mappings of peers' blocks, least recently used first out beyond `maxEntries`. A mapping keeps the
/// peer's pages alive after the peer frees them, until it is evicted or the cache is destroyed.
class PeerMappings {
 public:
  explicit PeerMappings(size_t maxEntries = 64) : maxEntries_(maxEntries) {}
  ~PeerMappings();
  PeerMappings(const PeerMappings&) = delete;
  PeerMappings& operator=(const PeerMappings&) = delete;

  /// Base address here of block `id` (fd `fd`, `bytes` long) of process `pid`, mapped on first use.
  /// Throws Error(SystemError) naming the process when it cannot be opened or mapped.
  std::byte* map(int pid, int fd, uint64_t id, size_t bytes);
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    int pid;
    uint64_t id;
    std::byte* base;
    size_t bytes;
  };
  size_t maxEntries_;
  std::list<Entry> entries_;  // most recently used first
};

}  // namespace conflux::shm
