// Doorbell: a per-rank wake-up word in shared memory, rung by anyone who makes progress the owner may be
// waiting for, slept on (futex) by the owner.
//
// Protocol (words in layout.h: DoorbellWords{seq, sleepers}):
//   ring:   seq.fetch_add(1)                      [R1, seq_cst]
//           if (sleepers.load() != 0) futex_wake  [R2, seq_cst]
//   sleep:  sleepers.fetch_add(1)                 [S1, seq_cst]
//           if (seq.load() == seen) futex_wait(seq, seen, timeout)   [S2, seq_cst]
//           sleepers.fetch_sub(1)
// Waiter usage: seen = read(); re-check the condition; if still false, sleep(seen).
//
// No lost wakeup. (a) Data vs. doorbell: a producer publishes its data (e.g. a channel head, release
// store) before R1; R1 is a release RMW and read() is an acquire load, so if `seen` already includes R1
// the waiter's re-check sees the data. Otherwise `seen` predates R1. (b) Ringer vs. sleeper: all four
// operations are seq_cst, so they fall in one total order consistent with program order (S1 < S2,
// R1 < R2). If S2 returns `seen` (R1 not visible), S2 precedes R1, hence S1 < S2 < R1 < R2 and R2 sees
// sleepers >= 1, so the ringer calls futex_wake. The kernel re-reads seq under its bucket lock when
// queueing the waiter, so the wake either finds the waiter queued or the waiter sees seq != seen.
// The only cost of a stale sleepers count is one unnecessary wake syscall.
// ABA: 2^32 rings between read() and sleep() would hide a change; the sleep then ends at its timeout.
//
// Ring-if-sleeping variant, for data a waiter polls directly (eager slots): the producer stores its data
// (release), issues a seq_cst fence and rings only if `sleepers` is non-zero; the waiter increments
// `sleepers` (seq_cst), reads seq, issues a seq_cst fence, checks its condition and only then sleeps on
// the seq it read. The two fences make it a store-buffering pair: either the producer sees the sleeper
// (and rings, which changes seq or wakes the futex) or the waiter's check sees the data. Producers that
// have no sleeper to wake pay a fence and one load, not a shared-line write.
#pragma once

#include <cstdint>
#include <functional>

#include "transport/shm/layout.h"

namespace conflux::shm {

/// Current sequence value; read it BEFORE re-checking the condition you are waiting for.
inline uint32_t readDoorbell(const DoorbellWords& bell) {
  return bell.seq.load(std::memory_order_acquire);  // pairs with the release half of ringDoorbell's R1
}

/// Rings the doorbell: bumps seq and wakes the owner's sleeping threads, if any.
void ringDoorbell(DoorbellWords& bell);

/// Sleeps until seq != seen, a ring, a signal or timeoutMs (< 0: no limit; 0: returns at once).
/// Spurious returns are possible: callers loop on their own condition.
void sleepOnDoorbell(DoorbellWords& bell, uint32_t seen, int timeoutMs);

/// Rings only when the owner may be asleep in sleepUnless(); call after a seq_cst fence that follows the
/// producer's data store (see the protocol above).
void ringIfSleeping(DoorbellWords& bell);

/// Sleeps until a ring, a signal or timeoutMs, unless `ready()` is already true after announcing the
/// sleeper; returns at once when it is. Spurious returns are possible.
void sleepUnless(DoorbellWords& bell, const std::function<bool()>& ready, int timeoutMs);

}  // namespace conflux::shm
