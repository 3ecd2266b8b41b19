#include "transport/shm/cross_memory.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>

namespace conflux::shm {
namespace {

constexpr uint64_t kProbeValue = 0x436f6e666c75784dULL;  // "ConfluxM"
// volatile: the probe reads it from another process, the compiler must keep it in memory.
const volatile uint64_t probeWord = kProbeValue;

// One process_vm_readv moves at most this much, so a peer that dies mid-call is noticed between pieces
// and no single system call pins gigabytes of the peer's pages.
constexpr uint64_t kMaxPieceBytes = uint64_t{64} << 20;

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

int readPeerMemory(pid_t pid, uint64_t remote, void* dst, uint64_t bytes) {
  auto* out = static_cast<char*>(dst);
  while (bytes > 0) {
    const uint64_t want = bytes < kMaxPieceBytes ? bytes : kMaxPieceBytes;
    iovec local{out, want};
    iovec peer{reinterpret_cast<void*>(remote), want};
    const ssize_t got = ::process_vm_readv(pid, &local, 1, &peer, 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (got == 0) return EFAULT;  // nothing readable at `remote`
    out += got;
    remote += static_cast<uint64_t>(got);
    bytes -= static_cast<uint64_t>(got);
  }
  return 0;
}

}  // namespace conflux::shm
