// Futex wait/wake on 32-bit words that live in memory shared between processes.
//
// The words are in MAP_SHARED file mappings mapped at different addresses in each process, so the
// operations must be the shared (non-FUTEX_PRIVATE_FLAG) kind: the kernel keys them by inode and offset.
#pragma once

#include <atomic>
#include <cstdint>

namespace conflux::shm {

enum class FutexResult {
  Woken,        ///< Woken by futexWake (or spuriously).
  ValueChanged, ///< The word no longer held `expected` when the kernel checked it.
  TimedOut,
  Interrupted,  ///< A signal arrived.
};

/// Blocks while `word` == `expected`, for at most timeoutMs milliseconds (timeoutMs < 0: no limit,
/// 0: returns TimedOut at once without a syscall). The kernel compares the value atomically with
/// queueing the waiter, so a futexWake issued after the value changed cannot be missed.
FutexResult futexWait(const std::atomic<uint32_t>& word, uint32_t expected, int timeoutMs);

/// Wakes up to `count` waiters on `word`; returns how many were woken.
int futexWake(const std::atomic<uint32_t>& word, int count);

}  // namespace conflux::shm
