// A clock cheap enough to read twice per collective call (the flight recorder's timestamps): the CPU's
// time-stamp counter where it is constant and invariant (x86-64; Linux then uses it as its clock source
// too), else steady_clock in nanoseconds. Ticks become time through TickScale, which pairs two readings
// of the counter with steady_clock readings taken at the same moments; no calibration sleep is needed.
// steady_clock costs 20-50 ns a reading on the VMs we measure on, the counter about 10.
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace conflux {

/// The current tick count (monotonic within a process).
inline uint64_t ticksNow() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
#endif
}

/// Converts ticks to wall-clock time, from two (ticks, wall clock) pairs: one taken when the scale is
/// made (process start, in practice) and one when it is asked (a dump), so the rate is measured over
/// the whole span between them.
class TickScale {
 public:
  TickScale() : startTicks_(ticksNow()), startWall_(wallNowNs()), startSteady_(steadyNowNs()) {}

  /// Nanoseconds per tick, measured from the scale's making until now. Convert a batch of readings with
  /// one rate so that equal ticks give equal times.
  double nsPerTick() const {
    const uint64_t nowTicks = ticksNow();
    const int64_t nowSteady = steadyNowNs();
    return nowTicks > startTicks_ ? static_cast<double>(nowSteady - startSteady_) / static_cast<double>(nowTicks - startTicks_)
                                  : 1.0;
  }
  /// Nanoseconds since the Unix epoch of tick count `t`, at `rate` (nsPerTick()).
  int64_t wallNs(uint64_t t, double rate) const {
    return startWall_ + static_cast<int64_t>(static_cast<double>(static_cast<int64_t>(t - startTicks_)) * rate);
  }
  /// Nanoseconds between two tick counts, at `rate`.
  static double spanNs(uint64_t from, uint64_t to, double rate) {
    return static_cast<double>(static_cast<int64_t>(to - from)) * rate;
  }

  /// nsPerTick() measured over at least `minSpanNs` (it waits out the rest when the scale is younger):
  /// a rate good enough to fix once, such as the one the metrics' duration buckets use.
  double settledNsPerTick(int64_t minSpanNs = 2000000) const {
    while (steadyNowNs() - startSteady_ < minSpanNs) {
    }
    return nsPerTick();
  }

  static int64_t wallNowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

 private:
  static int64_t steadyNowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  uint64_t startTicks_;
  int64_t startWall_;
  int64_t startSteady_;
};

/// The process's scale, made on first use (the first communicator), so that rates span the process's life.
inline const TickScale& processTickScale() {
  static const TickScale scale;
  return scale;
}

}  // namespace conflux
