#include "transport/ofi/memory.h"

#include <rdma/fi_errno.h>
#include <unistd.h>

#include "core/log.h"

namespace conflux::ofi {

namespace {
uintptr_t pageSize() {
  static const uintptr_t size = uintptr_t(::sysconf(_SC_PAGESIZE));
  return size;
}
}  // namespace

MrCache::MrCache(fid_domain* domain, fid_ep* ep, uint64_t mrMode, uint64_t access, size_t maxEntries)
    : domain_(domain), ep_(ep), mrMode_(mrMode), access_(access), maxEntries_(maxEntries ? maxEntries : 1) {}

MrCache::~MrCache() {
  unpinned_.clear();
  byStart_.clear();  // fi_close on every registration
}

MrCache::Entry* MrCache::find(uintptr_t begin, uintptr_t end) {
  // Entries starting at or before `begin`, nearest first; a few looks are enough in practice.
  auto it = byStart_.upper_bound(begin);
  for (int looked = 0; it != byStart_.begin() && looked < 8; ++looked) {
    --it;
    Entry* e = it->second.get();
    if (uintptr_t(e->addr) + e->bytes >= end) return e;
  }
  return nullptr;
}

MemoryRegion* MrCache::acquire(const void* ptr, size_t bytes, Status* error) {
  const uintptr_t begin = uintptr_t(ptr) & ~(pageSize() - 1);
  const uintptr_t end = (uintptr_t(ptr) + (bytes ? bytes : 1) + pageSize() - 1) & ~(pageSize() - 1);
  if (Entry* e = find(uintptr_t(ptr), uintptr_t(ptr) + bytes)) {
    ++stats_.hits;
    if (e->refs++ == 0) unpinned_.erase(e->lru);
    return e;
  }
  ++stats_.misses;
  auto entry = std::make_unique<Entry>();
  fid_mr* mr = nullptr;
  const uint64_t requestedKey = (mrMode_ & FI_MR_PROV_KEY) ? 0 : nextKey_++;
  int rc = fi_mr_reg(domain_, reinterpret_cast<void*>(begin), end - begin, access_, 0, requestedKey, 0, &mr,
                     nullptr);
  if (rc != 0) {
    if (error) *error = Status(Code::SystemError, "ofi: " + fiErrorMessage("fi_mr_reg", rc));
    return nullptr;
  }
  entry->mr.reset(mr);
  if ((mrMode_ & FI_MR_ENDPOINT) != 0) {
    rc = fi_mr_bind(mr, &ep_->fid, 0);
    if (rc == 0) rc = fi_mr_enable(mr);
    if (rc != 0) {
      if (error) *error = Status(Code::SystemError, "ofi: " + fiErrorMessage("fi_mr_bind/enable", rc));
      return nullptr;
    }
  }
  entry->addr = reinterpret_cast<void*>(begin);
  entry->bytes = end - begin;
  entry->desc = fi_mr_desc(mr);
  entry->key = fi_mr_key(mr);
  entry->remoteBase = (mrMode_ & FI_MR_VIRT_ADDR) ? uint64_t(begin) : 0;
  entry->refs = 1;
  Entry* raw = entry.get();
  byStart_.emplace(begin, std::move(entry));
  evictBeyondLimit();
  return raw;
}

void MrCache::release(MemoryRegion* region) {
  if (region == nullptr) return;
  auto* e = static_cast<Entry*>(region);
  if (e->refs <= 0) return;
  if (--e->refs == 0) {
    unpinned_.push_front(e);
    e->lru = unpinned_.begin();
    evictBeyondLimit();
  }
}

void MrCache::erase(Entry* e) {
  auto range = byStart_.equal_range(uintptr_t(e->addr));
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second.get() == e) {
      byStart_.erase(it);
      return;
    }
  }
}

void MrCache::evictBeyondLimit() {
  while (byStart_.size() > maxEntries_ && !unpinned_.empty()) {
    Entry* victim = unpinned_.back();
    unpinned_.pop_back();
    ++stats_.evictions;
    erase(victim);
  }
}

void MrCache::invalidate(const void* ptr, size_t bytes) {
  const uintptr_t begin = uintptr_t(ptr), end = begin + bytes;
  for (auto it = unpinned_.begin(); it != unpinned_.end();) {
    Entry* e = *it;
    const uintptr_t eb = uintptr_t(e->addr), ee = eb + e->bytes;
    if (eb < end && begin < ee) {
      it = unpinned_.erase(it);
      erase(e);
    } else {
      ++it;
    }
  }
}

MrCacheStats MrCache::stats() const {
  MrCacheStats s = stats_;
  s.entries = byStart_.size();
  return s;
}

}  // namespace conflux::ofi
