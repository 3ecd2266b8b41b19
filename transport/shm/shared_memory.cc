#include "transport/shm/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <string>

#include "core/error.h"

namespace conflux::shm {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, SharedBlock> blocks;  // by base address
  uint64_t nextId = 1;
};

Registry& registry() {
  static Registry r;  // never destroyed: blocks may be freed from static destructors of the caller
  return r;
}

size_t pageRound(size_t bytes) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

void* sharedAlloc(size_t bytes) {
  if (bytes == 0) throw Error(Code::InvalidArgument, "size must be > 0");
  const size_t len = pageRound(bytes);
  const int fd = memfd_create("conflux-mem", MFD_CLOEXEC);
  if (fd < 0) throwSystemError("memfd_create");
  if (ftruncate(fd, static_cast<off_t>(len)) != 0) {
    const int err = errno;
    close(fd);
    throw Error(Code::SystemError, systemErrorMessage("cannot size shared memory of " + std::to_string(len) + " bytes", err));
  }
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    close(fd);
    throw Error(Code::SystemError, systemErrorMessage("cannot map " + std::to_string(len) + " bytes", err));
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  SharedBlock b{r.nextId++, fd, static_cast<std::byte*>(p), len};
  r.blocks.emplace(reinterpret_cast<uintptr_t>(p), b);
  return p;
}

bool sharedFree(void* p) {
  Registry& r = registry();
  SharedBlock b;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.blocks.find(reinterpret_cast<uintptr_t>(p));
    if (it == r.blocks.end()) return false;
    b = it->second;
    r.blocks.erase(it);
  }
  munmap(b.base, b.bytes);
  close(b.fd);
  return true;
}

std::optional<SharedBlock> findShared(const void* p, size_t bytes) {
  if (p == nullptr) return std::nullopt;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.blocks.upper_bound(addr);  // first block starting after p
  if (it == r.blocks.begin()) return std::nullopt;
  --it;
  const SharedBlock& b = it->second;
  const uintptr_t end = it->first + b.bytes;
  if (addr >= end || bytes > end - addr) return std::nullopt;
  return b;
}

PeerMappings::~PeerMappings() {
  for (const Entry& e : entries_) munmap(e.base, e.bytes);
}

std::byte* PeerMappings::map(int pid, int fd, uint64_t id, size_t bytes) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->pid == pid && it->id == id) {
      entries_.splice(entries_.begin(), entries_, it);
      return it->base;
    }
  }
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int local = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (local < 0) {
    throw Error(Code::SystemError,
                systemErrorMessage("cannot open process " + std::to_string(pid) + "'s shared buffer (" + path + ")", errno));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, local, 0);
  const int err = errno;
  close(local);
  if (p == MAP_FAILED) {
    throw Error(Code::SystemError,
                systemErrorMessage("cannot map process " + std::to_string(pid) + "'s shared buffer", err));
  }
  entries_.push_front(Entry{pid, id, static_cast<std::byte*>(p), bytes});
  while (entries_.size() > maxEntries_) {
    munmap(entries_.back().base, entries_.back().bytes);
    entries_.pop_back();
  }
  return static_cast<std::byte*>(p);
}

}  // namespace conflux::shm
