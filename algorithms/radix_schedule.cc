// Which ranks take part in a recursive halving-doubling of radix up to k, and in which mixed radix
// (schedule.h: radixSchedule; rec_halving_doubling.cc runs it, cost_model.cc costs it).
//
// The P ranks that exchange are numbered P = r1 x ... x rm with every ri in [2, k]; the other n - P fold
// into a partner first, which moves the whole vector in and out again, so P never goes below the largest
// power of two <= n (radix 2's P: a larger radix never folds more ranks than radix 2). Among the P from
// there to n, the one with the fewest rounds (2m, and 2 more for a fold) wins, the larger on a tie.
#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "algorithms/schedule.h"

namespace conflux::sched {
namespace {

/// The fewest factors in [2, maxRadix] whose product is m; -1 when m has a prime factor above maxRadix.
/// `memo` caches the counts.
int fewestFactors(int m, int maxRadix, std::map<int, int>& memo) {
  if (m == 1) return 0;
  if (auto it = memo.find(m); it != memo.end()) return it->second;
  int best = -1;
  for (int f = std::min(m, maxRadix); f >= 2; --f) {
    if (m % f != 0) continue;
    const int rest = fewestFactors(m / f, maxRadix, memo);
    if (rest >= 0 && (best < 0 || rest + 1 < best)) best = rest + 1;
  }
  memo[m] = best;
  return best;
}

RadixSchedule compute(int n, int maxRadix) {
  RadixSchedule out;
  const int pow2 = largestPowerOfTwo(n);
  if (maxRadix <= 2) {
    out.P = pow2;
    for (int m = out.P; m > 1; m /= 2) out.radices.push_back(2);
    return out;
  }
  std::map<int, int> memo;
  int bestRounds = -1;
  for (int P = n; P >= pow2; --P) {
    const int steps = fewestFactors(P, maxRadix, memo);
    if (steps < 0) continue;
    const int rounds = 2 * steps + (P < n ? 2 : 0);  // halving and doubling, fold-in and fold-out
    if (bestRounds < 0 || rounds < bestRounds) {
      bestRounds = rounds;
      out.P = P;
    }
  }
  // Spell the chosen P out: at each step the largest factor that keeps the fewest steps.
  for (int m = out.P; m > 1;) {
    for (int f = std::min(m, maxRadix); f >= 2; --f) {
      if (m % f == 0 && fewestFactors(m / f, maxRadix, memo) == fewestFactors(m, maxRadix, memo) - 1) {
        out.radices.push_back(f);
        m /= f;
        break;
      }
    }
  }
  return out;
}

}  // namespace

RadixSchedule radixSchedule(int n, int maxRadix) {
  if (n <= 1) return {};
  // Every rank's plan and every prediction asks again (hier_rhd builds N inner plans per shard length):
  // the search runs once per (n, radix) in a process.
  static std::mutex mutex;
  static std::map<std::pair<int, int>, RadixSchedule> cache;
  const std::pair<int, int> key{n, std::max(2, maxRadix)};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  RadixSchedule s = compute(key.first, key.second);
  std::lock_guard<std::mutex> lock(mutex);
  return cache.emplace(key, std::move(s)).first->second;
}

}  // namespace conflux::sched
