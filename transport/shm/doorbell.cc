// Doorbell ring/sleep; the memory-ordering argument is in doorbell.h.
#include "transport/shm/doorbell.h"

#include <climits>

#include "transport/shm/futex.h"

namespace conflux::shm {

void ringDoorbell(DoorbellWords& bell) {
  // R1: seq_cst RMW, also a release: everything the ringer published before is visible to a waiter
  // whose read() observes the new value.
  bell.seq.fetch_add(1, std::memory_order_seq_cst);
  // R2: seq_cst load; must not be reordered before R1 (a relaxed/acquire load could be, on x86 too:
  // store-load reordering is exactly what seq_cst forbids here).
  if (bell.sleepers.load(std::memory_order_seq_cst) != 0) futexWake(bell.seq, INT_MAX);
}

void sleepOnDoorbell(DoorbellWords& bell, uint32_t seen, int timeoutMs) {
  if (timeoutMs == 0) return;
  bell.sleepers.fetch_add(1, std::memory_order_seq_cst);  // S1
  if (bell.seq.load(std::memory_order_seq_cst) == seen)   // S2 (the kernel checks again atomically)
    futexWait(bell.seq, seen, timeoutMs);
  // Leaving: relaxed is enough, a ringer that still sees us only makes a spare wake syscall.
  bell.sleepers.fetch_sub(1, std::memory_order_relaxed);
}

void ringIfSleeping(DoorbellWords& bell) {
  if (bell.sleepers.load(std::memory_order_relaxed) != 0) ringDoorbell(bell);
}

void sleepUnless(DoorbellWords& bell, const std::function<bool()>& ready, int timeoutMs) {
  if (timeoutMs == 0) return;
  bell.sleepers.fetch_add(1, std::memory_order_seq_cst);
  const uint32_t seen = bell.seq.load(std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with the producer's fence
  if (!ready()) futexWait(bell.seq, seen, timeoutMs);
  bell.sleepers.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace conflux::shm
