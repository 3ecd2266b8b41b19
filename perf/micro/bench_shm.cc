// Shared-memory transport: channel streaming bandwidth, 8-byte ping-pong latency through channels and
// doorbells, and barrier latency. The ranks are threads of this process, each with its own ShmWorld
// (segments, channels and doorbells are exactly those of separate processes; only the LocalExchange used
// at setup is an in-process barrier). Rank 0 is the benchmark thread; ranks 1.. are helper threads.
// Rank r is pinned to CPU r % ncpus (so 4 ranks on 2 cores share cores, as tests and CI do).
//
// Names:   shm/stream/<size>/spin:<n>    rank 0 streams <size>-byte messages to rank 1, which copies them
//                                        out into a private buffer; an iteration ends when rank 1 consumed
//                                        the whole message (channel empty again). Counter GBps.
//          shm/pingpong/8B/spin:<n>      8 bytes 0 -> 1 -> 0; counter one_way_s (half a round trip).
//          shm/barrier/ranks:<n>/spin:<n> one barrier of n ranks per iteration.
//          sched/handoff/processes:2     two processes pinned to one CPU pass a turn back and forth
//                                        through a shared word, yielding the core while it is not
//                                        theirs; counter handoff_s (one switch from one to the other).
//                                        The floor of a collective with two ranks per core: each rank
//                                        must run once per call, so a call costs at least two of them.
// spin:<n> is how many polls a waiter makes before it sleeps on its doorbell (CONFLUX_SPIN_COUNT's
// default is 2000; spin:0 sleeps at once and so measures the futex wake path).
// CONFLUX_SHM_CHANNEL_BYTES sets the channel size, as for a communicator.
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "bench_util.h"
#include "shm_threads.h"
#include "core/config.h"
#include "transport/shm/shm_world.h"

namespace {

using conflux::bench::Buffer;
using conflux::bench::sizeLabel;
using conflux::bench::ThreadRanks;
using conflux::bench::waitFor;
using conflux::shm::ShmWorld;

// Rank 1 of the stream benchmark: copies everything that arrives from rank 0 into its buffer `dst`
// (msgBytes, allocated and faulted in before the timing starts).
void drainChannel(ShmWorld& w, Buffer& dst, size_t msgBytes, int spin, const std::atomic<bool>& stop) {
  auto& ch = w.recvFrom(0);
  size_t off = 0;
  for (;;) {
    auto in = ch.readable(msgBytes);
    if (in.empty()) {
      waitFor(w, [&] { return !ch.readable(1).empty() || stop.load(std::memory_order_relaxed); }, spin);
      if (stop.load() && ch.readable(1).empty()) return;
      continue;
    }
    const size_t n = std::min(in.size(), msgBytes - off);
    std::memcpy(dst.data() + off, in.data(), n);
    off = (off + n) % msgBytes;
    ch.consume(n);
  }
}

void benchStream(benchmark::State& state, size_t msgBytes, int spin) {
  Buffer src(msgBytes), dst(msgBytes);
  std::memset(src.data(), 0x5a, msgBytes);
  ThreadRanks s(2, [&dst, msgBytes, spin](ShmWorld& w, int, const std::atomic<bool>& stop) {
    drainChannel(w, dst, msgBytes, spin, stop);
  });
  ShmWorld& w = s.world();
  auto& ch = w.sendTo(1);
  const size_t capacity = ch.writable();
  for (auto _ : state) {
    size_t off = 0;
    while (off < msgBytes) {
      const size_t n = ch.write(src.data() + off, msgBytes - off);
      if (n > 0) {
        off += n;
        continue;
      }
      waitFor(w, [&] { return ch.writable() > 0; }, spin);
    }
    waitFor(w, [&] { return ch.writable() == capacity; }, spin);  // delivered: the peer consumed it all
  }
  const auto iters = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(static_cast<double>(msgBytes) * iters));
  state.counters["GBps"] = conflux::bench::gbps(static_cast<double>(msgBytes) * iters);
  state.counters["channel_bytes"] = static_cast<double>(capacity);
}

void echo(ShmWorld& w, int spin, const std::atomic<bool>& stop) {
  auto& in = w.recvFrom(0);
  auto& out = w.sendTo(0);
  for (;;) {
    waitFor(w, [&] { return in.readable(8).size() == 8 || stop.load(std::memory_order_relaxed); }, spin);
    auto msg = in.readable(8);
    if (msg.size() < 8) return;  // stopped
    uint64_t v;
    std::memcpy(&v, msg.data(), 8);
    in.consume(8);
    ++v;
    while (out.write(&v, 8) == 0) waitFor(w, [&] { return out.writable() >= 8; }, spin);
  }
}

void benchPingPong(benchmark::State& state, int spin) {
  ThreadRanks s(2, [=](ShmWorld& w, int, const std::atomic<bool>& stop) { echo(w, spin, stop); });
  ShmWorld& w = s.world();
  auto& out = w.sendTo(1);
  auto& in = w.recvFrom(1);
  uint64_t v = 0;
  for (auto _ : state) {
    while (out.write(&v, 8) == 0) waitFor(w, [&] { return out.writable() >= 8; }, spin);
    waitFor(w, [&] { return in.readable(8).size() == 8; }, spin);
    std::memcpy(&v, in.readable(8).data(), 8);
    in.consume(8);
  }
  if (v != static_cast<uint64_t>(state.iterations())) state.SkipWithError("ping-pong lost a message");
  state.counters["one_way_s"] = benchmark::Counter(2.0 * static_cast<double>(state.iterations()),
                                                   benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void barrierLoop(ShmWorld& w, int spin, const std::atomic<bool>& stop) {
  while (!stop.load(std::memory_order_relaxed)) {
    const uint64_t g = w.barrierArrive();
    waitFor(w, [&] { return w.barrierReached(g) || stop.load(std::memory_order_relaxed); }, spin);
  }
}

void benchBarrier(benchmark::State& state, int nranks, int spin) {
  ThreadRanks s(nranks, [=](ShmWorld& w, int, const std::atomic<bool>& stop) { barrierLoop(w, spin, stop); });
  ShmWorld& w = s.world();
  for (auto _ : state) {
    const uint64_t g = w.barrierArrive();
    waitFor(w, [&] { return w.barrierReached(g); }, spin);
  }
}

// One process of the handoff benchmark: takes its turn (the turn word's parity is `me`) until `stop`.
void takeTurns(std::atomic<uint64_t>& turn, std::atomic<bool>& stop, uint64_t me) {
  while (!stop.load(std::memory_order_relaxed)) {
    if ((turn.load(std::memory_order_acquire) & 1) == me) {
      turn.fetch_add(1, std::memory_order_acq_rel);
    } else {
      sched_yield();
    }
  }
}

void benchHandoff(benchmark::State& state) {
  struct Shared {
    std::atomic<uint64_t> turn{0};
    std::atomic<bool> stop{false};
  };
  void* page = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    state.SkipWithError("mmap failed");
    return;
  }
  auto* sh = new (page) Shared;
  cpu_set_t saved, one;
  CPU_ZERO(&one);
  const int cpu = sched_getcpu();
  if (cpu < 0 || sched_getaffinity(0, sizeof saved, &saved) != 0) {
    munmap(page, sizeof(Shared));
    state.SkipWithError("cannot read this thread's CPU or affinity");
    return;
  }
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) {  // the child inherits it: both on this CPU
    munmap(page, sizeof(Shared));
    state.SkipWithError("cannot pin to one CPU");
    return;
  }
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the benchmark
    if (getppid() != parent) _exit(0);
    takeTurns(sh->turn, sh->stop, 1);
    _exit(0);
  }
  if (child < 0) {
    sched_setaffinity(0, sizeof saved, &saved);
    munmap(page, sizeof(Shared));
    state.SkipWithError("fork failed");
    return;
  }
  constexpr int kTurns = 1000;  // per iteration: 2000 switches (ours and the child's turns)
  for (auto _ : state) {
    for (int i = 0; i < kTurns; ++i) {
      while ((sh->turn.load(std::memory_order_acquire) & 1) != 0) sched_yield();
      sh->turn.fetch_add(1, std::memory_order_acq_rel);
    }
  }
  sh->stop.store(true);
  waitpid(child, nullptr, 0);
  sched_setaffinity(0, sizeof saved, &saved);
  munmap(page, sizeof(Shared));
  state.counters["handoff_s"] = benchmark::Counter(static_cast<double>(state.iterations()) * 2 * kTurns,
                                                   benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void registerAll() {
  const int ncpu = conflux::bench::allowedCpus();
  const int spins[] = {2000, 0};
  for (size_t bytes : {64u << 10, 256u << 10, 1u << 20, 4u << 20, 16u << 20}) {
    for (int spin : spins) {
      const std::string name = "shm/stream/" + sizeLabel(bytes) + "/spin:" + std::to_string(spin);
      benchmark::RegisterBenchmark(name.c_str(), benchStream, size_t{bytes}, spin)->UseRealTime();
    }
  }
  for (int spin : spins) {
    const std::string name = "shm/pingpong/8B/spin:" + std::to_string(spin);
    benchmark::RegisterBenchmark(name.c_str(), benchPingPong, spin)->UseRealTime();
  }
  for (int n : {2, 4}) {
    // More ranks than the CPUs this process may use: spinning steals the CPU the others need, so spin
    // briefly (as the communicator does, which also counts cgroup quotas: CONFLUX_OVERSUBSCRIBED_SPIN_COUNT).
    const int busySpin = n > ncpu ? static_cast<int>(conflux::config::getInt(
                                        conflux::config::Var::OVERSUBSCRIBED_SPIN_COUNT))
                                  : 2000;
    for (int spin : busySpin == 0 ? std::vector<int>{0} : std::vector<int>{busySpin, 0}) {
      const std::string name = "shm/barrier/ranks:" + std::to_string(n) + "/spin:" + std::to_string(spin);
      benchmark::RegisterBenchmark(name.c_str(), benchBarrier, n, spin)->UseRealTime();
    }
  }
  benchmark::RegisterBenchmark("sched/handoff/processes:2", benchHandoff)->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
