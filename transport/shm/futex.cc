// Thin wrappers over the futex(2) system call (FUTEX_WAIT / FUTEX_WAKE, shared between processes).
#include "transport/shm/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

namespace conflux::shm {
namespace {

uint32_t* wordAddress(const std::atomic<uint32_t>& word) {
  // std::atomic<uint32_t> is a plain 32-bit word (static_assert in layout.h); the kernel only reads it
  // during FUTEX_WAIT and ignores the contents for FUTEX_WAKE.
  return reinterpret_cast<uint32_t*>(const_cast<std::atomic<uint32_t>*>(&word));
}

}  // namespace

FutexResult futexWait(const std::atomic<uint32_t>& word, uint32_t expected, int timeoutMs) {
  if (timeoutMs == 0) return FutexResult::TimedOut;
  timespec ts{};
  timespec* tsp = nullptr;
  if (timeoutMs > 0) {
    ts.tv_sec = timeoutMs / 1000;
    ts.tv_nsec = static_cast<long>(timeoutMs % 1000) * 1000000L;
    tsp = &ts;  // FUTEX_WAIT takes a relative timeout, measured on CLOCK_MONOTONIC.
  }
  const long rc = syscall(SYS_futex, wordAddress(word), FUTEX_WAIT, expected, tsp, nullptr, 0);
  if (rc == 0) return FutexResult::Woken;
  switch (errno) {
    case EAGAIN: return FutexResult::ValueChanged;
    case ETIMEDOUT: return FutexResult::TimedOut;
    case EINTR: return FutexResult::Interrupted;
    default: return FutexResult::Woken;  // EFAULT/EINVAL cannot happen for a mapped, aligned word.
  }
}

int futexWake(const std::atomic<uint32_t>& word, int count) {
  const long rc = syscall(SYS_futex, wordAddress(word), FUTEX_WAKE, count, nullptr, nullptr, 0);
  return rc < 0 ? 0 : static_cast<int>(rc);
}

}  // namespace conflux::shm
