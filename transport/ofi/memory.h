// Registration cache of one domain. Entries cover page-aligned address ranges; a request inside a
// cached range is a hit (no fi_mr_reg). Pinned entries (in use by an operation or a caller) are never
// evicted; unpinned ones are evicted least recently used first beyond `maxEntries`.
//
// MR mode bits honoured: FI_MR_PROV_KEY (key from fi_mr_key, else we pick unique keys), FI_MR_VIRT_ADDR
// (peers address by virtual address, else by offset: MemoryRegion::remoteBase), FI_MR_ENDPOINT
// (fi_mr_bind to the endpoint + fi_mr_enable), FI_MR_ALLOCATED (we only register the caller's mapped
// pages: page rounding stays inside them), FI_MR_LOCAL (the data path passes fi_mr_desc). Host memory
// only for now; FI_MR_HMEM / device buffers are documented in docs/ofi.md.
//
// Caveat: a registration pins pages. If the caller frees a buffer and new memory appears at the same
// addresses, invalidate() must be called first (the cache cannot see munmap).
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>

#include "core/error.h"
#include "transport/ofi/fabric.h"
#include "transport/ofi/transport.h"

namespace conflux::ofi {

class MrCache {
 public:
  /// `ep` is needed only with FI_MR_ENDPOINT; `access` is FI_SEND|FI_RECV (+ FI_WRITE|FI_REMOTE_WRITE with RMA).
  MrCache(fid_domain* domain, fid_ep* ep, uint64_t mrMode, uint64_t access, size_t maxEntries);
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  /// A pinned region covering [ptr, ptr+bytes) (bytes > 0), or nullptr with `error` set.
  MemoryRegion* acquire(const void* ptr, size_t bytes, Status* error);
  /// Unpins a region from acquire().
  void release(MemoryRegion* region);
  /// Drops unpinned entries overlapping [ptr, ptr+bytes) (call before freeing registered memory).
  void invalidate(const void* ptr, size_t bytes);
  MrCacheStats stats() const;

 private:
  struct Entry : MemoryRegion {
    Fid<fid_mr> mr;
    int refs = 0;
    std::list<Entry*>::iterator lru;  ///< valid while refs == 0
  };
  Entry* find(uintptr_t begin, uintptr_t end);
  void evictBeyondLimit();
  void erase(Entry* entry);

  fid_domain* domain_;
  fid_ep* ep_;
  uint64_t mrMode_;
  uint64_t access_;
  size_t maxEntries_;
  uint64_t nextKey_ = 1;
  std::multimap<uintptr_t, std::unique_ptr<Entry>> byStart_;
  std::list<Entry*> unpinned_;  ///< most recently released first
  MrCacheStats stats_;
};

}  // namespace conflux::ofi
