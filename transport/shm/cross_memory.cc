#include "transport/shm/cross_memory.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/copy_bytes.h"

namespace conflux::shm {
namespace {

constexpr uint64_t kProbeValue = 0x436f6e666c75784dULL;  // "ConfluxM"
// volatile: the probe reads it from another process, the compiler must keep it in memory.
const volatile uint64_t probeWord = kProbeValue;

// One process_vm_readv moves at most this much, so a peer that dies mid-call is noticed between pieces
// and no single system call pins gigabytes of the peer's pages.
constexpr uint64_t kMaxPieceBytes = uint64_t{64} << 20;

// The kernel copies with `rep movsb` page by page, and on these AMD EPYC vCPUs that ran 4-5x slower
// (1.4-2.4 GB/s instead of 8-11, 2 KiB to 4 MiB measured) when the destination lies 1-31 bytes past the
// source modulo 4 KiB: the same 4K aliasing as glibc's memcpy (core/copy_bytes.h), but at every size.
// Such reads go through a bounce buffer at the source's page offset, copied on with copyBytes.
constexpr uint64_t kPageBytes = 4096;
constexpr uint64_t kAliasMinBytes = 2048;
constexpr uint64_t kBounceBytes = uint64_t{128} << 10;  // a piece stays in L2 between the two copies

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

/// This thread's bounce buffer (kBounceBytes past any page offset), allocated on first use.
std::byte* bounceBuffer() {
  thread_local std::unique_ptr<std::byte, FreeDeleter> buffer;
  if (!buffer) buffer.reset(static_cast<std::byte*>(std::aligned_alloc(kPageBytes, kBounceBytes + kPageBytes)));
  return buffer.get();
}

/// One process_vm_readv of up to `want` bytes; the bytes read, or -errno (0: nothing readable).
ssize_t readOnce(pid_t pid, uint64_t remote, void* dst, uint64_t want) {
  iovec local{dst, want};
  iovec peer{reinterpret_cast<void*>(remote), want};
  for (;;) {
    const ssize_t got = ::process_vm_readv(pid, &local, 1, &peer, 1, 0);
    if (got >= 0) return got;
    if (errno != EINTR) return -errno;
  }
}

}  // namespace

uint64_t crossMemoryProbeAddress() { return reinterpret_cast<uint64_t>(&probeWord); }

bool canReadPeerMemory(pid_t pid, uint64_t probeAddress, std::string& why) {
  if (pid <= 0 || probeAddress == 0) {
    why = "the peer's process id is not known here (another pid namespace)";
    return false;
  }
  uint64_t value = 0;
  if (int err = readPeerMemory(pid, probeAddress, &value, sizeof value); err != 0) {
    why = std::string("process_vm_readv: ") + std::strerror(err);
    return false;
  }
  if (value != kProbeValue) {
    why = "process_vm_readv read an unexpected value (a different program, or pid reuse)";
    return false;
  }
  return true;
}

bool kernelCopyAliasesSlowly(const void* dst, uint64_t remote, uint64_t bytes) {
#if defined(__x86_64__)
  return bytes >= kAliasMinBytes && storesTrailLoadsBy4KAlias(dst, remote);
#else  // measured on x86-64 only (as copyBytes)
  (void)dst, (void)remote, (void)bytes;
  return false;
#endif
}

int readPeerMemory(pid_t pid, uint64_t remote, void* dst, uint64_t bytes) {
  auto* out = static_cast<std::byte*>(dst);
  // Without a bounce buffer (allocation failed) the reads go straight to dst, slowly but correctly.
  std::byte* const bounceBase = kernelCopyAliasesSlowly(dst, remote, bytes) ? bounceBuffer() : nullptr;
  while (bytes > 0) {
    // At the source's page offset, where the kernel copies fast.
    std::byte* const bounce = bounceBase != nullptr ? bounceBase + remote % kPageBytes : nullptr;
    const uint64_t limit = bounce != nullptr ? kBounceBytes : kMaxPieceBytes;
    const uint64_t want = bytes < limit ? bytes : limit;
    const ssize_t got = readOnce(pid, remote, bounce != nullptr ? bounce : out, want);
    if (got < 0) return static_cast<int>(-got);
    if (got == 0) return EFAULT;  // nothing readable at `remote`
    if (bounce != nullptr) copyBytes(out, bounce, static_cast<size_t>(got));
    out += got;
    remote += static_cast<uint64_t>(got);
    bytes -= static_cast<uint64_t>(got);
  }
  return 0;
}

}  // namespace conflux::shm
