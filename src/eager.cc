// Eager small collectives: every rank publishes its whole input with one flag, then computes its output
// straight from the peers' slots.
//
// Schedule of eager call k on local rank r (n ranks on one node, slot parity p = k & 1):
//   1. publish: copy the input (eagerInputBytes) and the call descriptor into own slot p, store
//      slot.seq = k (release), then ring the peers that sleep (ring-if-sleeping, doorbell.h);
//   2. copy the part of the output that is the own input (all-gather's and all-to-all's own block, a
//      broadcast root's vector), which needs no peer: its cache misses overlap the peers' latency;
//   3. wait until every peer's slot p shows k (acquire), checking each peer's descriptor against ours;
//   4. compute the rest of the output from the slots (own input read from send). Reductions combine the sources in
//      rank order 0..n-1, so every rank computes the same bits. PreMulSum: step 1 publishes the input
//      multiplied by the rank's scalar, and step 4 reads the own input from the own slot too.
// No barrier is needed before a slot is reused: rank r rewrites slot p at eager call k + 2, after it
// finished call k + 1, which needed every peer's call-(k + 1) slot; a peer publishes that only after it
// returned from call k, i.e. after its last read of r's call-k slot. That is why step 3 waits for every
// peer even where the output needs only some of them (reduce on non-roots, broadcast).
// Eager or not depends only on the call's arguments, so all ranks make the same eager calls and agree on k;
// a rank whose arguments differ is caught by the descriptor check (or, if it took a plan instead, by the
// call-descriptor check against its executor), not left hanging.
#include "src/eager.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/copy_bytes.h"
#include "src/call_check.h"
#include "src/wait.h"
#include "core/log.h"
#include "kernels/cpu/reduce.h"
#include "transport/shm/layout.h"

namespace conflux {
namespace {

using Clock = WaitClock;

class EagerRun {
 public:
  EagerRun(const EagerCall& call, shm::ShmWorld& world, const ExecEnv& env, ExecWorkspace& work)
      : call_(call), env_(env), world_(&world), me_(env.localIndex[env.rank]), n_(env.nranks),
        size_(world.localSize()), elt_(dataTypeSize(call.dtype)), srcs_(work.srcPtrs),
        slots_(slotsOf(world, work)), parity_(static_cast<int>(call.eagerSeq & 1)) {}

  Status run() {
    if (n_ > 1) publish();
    copyOwnBlock();
    if (n_ > 1) {
      Status s = waitForPeers();
      if (!s) return s;
    }
    compute();
    return Status::ok();
  }

 private:
  // Every member's slot of both parities, from the workspace (filled on the world's first eager call).
  static void* const* slotsOf(shm::ShmWorld& world, ExecWorkspace& work) {
    if (work.eagerWorld != &world) {
      const int size = world.localSize();
      work.eagerSlots.resize(2 * static_cast<size_t>(size));
      for (int parity = 0; parity < 2; ++parity) {
        for (int l = 0; l < size; ++l) work.eagerSlots[size_t(parity * size + l)] = &world.eagerSlot(l, parity);
      }
      work.eagerWorld = &world;
    }
    return work.eagerSlots.data();
  }
  shm::EagerSlot& slotOf(int parity, int local) const {
    return *static_cast<shm::EagerSlot*>(slots_[static_cast<size_t>(parity * size_ + local)]);
  }
  shm::EagerSlot& slot(int local) const { return slotOf(parity_, local); }
  // The slot of the other parity: a peer's previous eager call.
  shm::EagerSlot& otherSlot(int local) const { return slotOf(1 - parity_, local); }
  uint64_t blockBytes() const { return call_.count * elt_; }

  shm::CallDescriptor descriptor() const {
    return describeCall(call_.callSeq, call_.coll, call_.dtype, call_.op, call_.root, call_.count);
  }

  uint64_t ownInputBytes() const {
    switch (call_.coll) {
      case Collective::Broadcast: return env_.rank == call_.root ? blockBytes() : 0;
      case Collective::ReduceScatter:
      case Collective::AllToAll: return blockBytes() * static_cast<uint64_t>(n_);
      default: return blockBytes();
    }
  }

  void publish() {
    shm::EagerSlot& s = slot(me_);
    s.count = call_.count;
    s.coll = static_cast<uint8_t>(call_.coll);
    s.dtype = static_cast<uint8_t>(call_.dtype);
    s.op = static_cast<uint8_t>(call_.op);
    s.root = call_.root;
    s.callSeq = call_.callSeq;
    s.cpu.store(myCpu_, std::memory_order_relaxed);
    if (uint64_t b = ownInputBytes(); b > 0) {
      if (scaled()) {
        const void* in = call_.send;
        cpu::premulSumFunction(call_.dtype)(s.payload, &in, 1, b / elt_, 1, call_.scalar);
      } else {
        copyBytes(s.payload, call_.send, b);
      }
    }
    s.seq.store(call_.eagerSeq, std::memory_order_release);
    world_->wakeSleepingPeers();
  }

  bool ready(int local) const { return slot(local).seq.load(std::memory_order_acquire) == call_.eagerSeq; }

  // Advances next_ past every peer whose slot is published; checks their descriptors.
  Status collectReady(bool& progressed) {
    while (next_ < size_ && (next_ == me_ || ready(next_))) {
      if (next_ != me_) {
        const shm::EagerSlot& s = slot(next_);
        const shm::CallDescriptor d = describeCall(s.callSeq, static_cast<Collective>(s.coll),
                                                   static_cast<DataType>(s.dtype), static_cast<RedOp>(s.op), s.root, s.count);
        if (std::string field = callMismatch(descriptor(), d); !field.empty()) return mismatch(field, next_);
        progressed = true;
      }
      ++next_;
    }
    return Status::ok();
  }

  // The clock is read only on the slow path (checkHealth): an 8-byte call that finds its peers within
  // the spin reads it never, where two reads were an eighth of its time. The no-progress time then counts
  // from the first health check after the last progress: later than the progress itself by one backoff's
  // polls and yields (microseconds; oversubscribed, with the most remote polls and yields that each give
  // away a time slice, milliseconds), which the timeout's margin covers.
  Status waitForPeers() {
    Backoff backoff(env_);
    bool published = false;
    for (;;) {
      bool progressed = false;
      if (Status s = collectReady(progressed); !s) return s;
      if (next_ == size_) return Status::ok();
      if (progressed) {
        backoff.progressed();
        progressTimed_ = false;
        remotePolls_ = 0;
        continue;
      }
      // Oversubscribed, and every late peer last ran on another CPU: polling on costs this CPU nothing
      // any of them needs, where a yield costs a context switch (and the core-mate it switches to has
      // published already, so it yields back).
      if (remotePolls_ < env_.remoteSpinCount && myCpu_ != 0 && onlyOtherCpusLate()) {
        ++remotePolls_;
        cpuRelax();
        continue;
      }
      if (backoff.pause()) continue;
      // Slow path: a peer is late. Make this call visible to a peer that took a plan by mistake (its
      // executor checks call descriptors), then check health and sleep until a peer publishes.
      if (!published && env_.checkArgs) {
        world_->publishCall(descriptor());
        published = true;
      }
      if (Status s = checkHealth(); !s) return s;
      const int waitFor = next_;
      call_.trace.noteWait(0, env_.globalOfLocal[waitFor]);
      world_->sleepUnless([&] { return ready(waitFor) || world_->error().has_value(); }, kMaxSleepMs);
      backoff.woke();
    }
  }

  // Every peer not yet published ran on another CPU than this rank when it last published (the previous
  // eager call, whose slot has the other parity). A hint: a peer may have moved since.
  bool onlyOtherCpusLate() const {
    for (int l = next_; l < size_; ++l) {
      if (l == me_ || ready(l)) continue;
      const uint8_t c = otherSlot(l).cpu.load(std::memory_order_relaxed);
      if (c == 0 || c == myCpu_) return false;
    }
    return true;
  }
  // This rank's CPU as a slot's hint; read only where it is used (oversubscribed), though sched_getcpu is
  // cheap (glibc reads it from the rseq area).
  static uint8_t cpuHint(const ExecEnv& env) {
    if (env.remoteSpinCount == 0) return 0;
    const int c = sched_getcpu();
    return c < 0 ? 0 : static_cast<uint8_t>(1 + c % 255);
  }

  std::string where() const {
    return std::string(collectiveName(call_.coll)) + " (call #" + std::to_string(call_.callSeq) +
           ", eager, waiting for rank " + std::to_string(env_.globalOfLocal[next_]) + ")";
  }

  Status mismatch(const std::string& field, int local) {
    const int g = env_.globalOfLocal[local];
    return reportFailure(env_,
                         Status(Code::InvalidUsage, "ranks disagree on call #" + std::to_string(call_.callSeq) +
                                                        ": " + field + " (rank " + std::to_string(env_.rank) +
                                                        " vs rank " + std::to_string(g) + ")"),
                         -1);
  }

  Status checkHealth() {
    if (Status s = interruption(env_, [&] { return where(); }); !s) return s;
    const auto now = Clock::now();
    if (!progressTimed_) {
      lastProgress_ = now;
      progressTimed_ = true;
    }
    if (now - lastLiveness_ >= kLivenessInterval) {
      lastLiveness_ = now;
      for (int dead : world_->deadPeers()) {
        if (dead == me_ || ready(dead)) continue;  // a peer that published and exited is not an error
        const int g = env_.globalOfLocal[dead];
        return reportFailure(env_, Status(Code::RemoteError, "rank " + std::to_string(g) + " exited during " + where()), g);
      }
      if (env_.checkArgs) {
        for (int l = next_; l < size_; ++l) {
          if (l == me_ || ready(l)) continue;
          auto d = world_->peerCall(l, call_.callSeq);
          if (!d) continue;
          std::string field = callMismatch(descriptor(), *d);
          if (field.empty()) field = "rank " + std::to_string(env_.globalOfLocal[l]) + " did not take the eager path";
          return mismatch(field, l);
        }
      }
    }
    const auto idleMs = std::chrono::duration_cast<std::chrono::milliseconds>(now - lastProgress_).count();
    if (idleMs >= env_.timeoutMs) {
      return reportTimeout(env_, idleMs, where(), env_.globalOfLocal[next_]);
    }
    return Status::ok();
  }

  // PreMulSum: each rank publishes its input scaled, and reads its own from its slot too.
  bool scaled() const { return call_.op == RedOp::PreMulSum && call_.scalar != nullptr; }

  // Input of global rank g: own send buffer (own slot when scaled, or alone), or g's slot.
  const std::byte* input(int g) const {
    if (g == env_.rank && !(scaled() && n_ > 1)) return static_cast<const std::byte*>(call_.send);
    return slot(env_.localIndex[g]).payload;
  }

  void reduceInto(void* dst, uint64_t offset) {
    srcs_.resize(static_cast<size_t>(n_));
    for (int g = 0; g < n_; ++g) srcs_[g] = input(g) + offset;
    if (scaled() && n_ == 1) {  // alone: the input was never published, so it is scaled here
      cpu::premulSumFunction(call_.dtype)(dst, srcs_.data(), 1, call_.count, 1, call_.scalar);
    } else {
      cpu::reduceFunction(call_.dtype, call_.op)(dst, srcs_.data(), n_, call_.count);
    }
    if (call_.op == RedOp::Avg) cpu::divideInPlace(call_.dtype, dst, call_.count, n_);
  }

  static void copyUnlessSame(void* dst, const void* src, uint64_t bytes) {
    if (dst != src) copyBytes(dst, src, bytes);
  }

  // The part of the output that is this rank's own input (all-gather's and all-to-all's own block, a
  // broadcast root's vector), copied between publishing and waiting: it needs no peer, so its cache
  // misses (the perf suite's buffers are cold, say) overlap the peers' latency instead of following it.
  // compute() leaves it out.
  void copyOwnBlock() {
    auto* recv = static_cast<std::byte*>(call_.recv);
    const uint64_t b = blockBytes();
    const auto r = static_cast<uint64_t>(env_.rank);
    switch (call_.coll) {
      case Collective::AllGather: copyUnlessSame(recv + r * b, input(env_.rank), b); break;
      case Collective::AllToAll: copyUnlessSame(recv + r * b, input(env_.rank) + r * b, b); break;
      case Collective::Broadcast:
        if (env_.rank == call_.root) copyUnlessSame(recv, input(env_.rank), b);
        break;
      default: break;
    }
  }

  void compute() {
    auto* recv = static_cast<std::byte*>(call_.recv);
    const uint64_t b = blockBytes();
    const auto r = static_cast<uint64_t>(env_.rank);
    const int skip = env_.rank;  // its block: copied already (copyOwnBlock)
    switch (call_.coll) {
      case Collective::AllReduce: reduceInto(recv, 0); break;
      case Collective::Reduce:
        if (env_.rank == call_.root) reduceInto(recv, 0);
        break;
      case Collective::Broadcast:
        if (skip != call_.root) copyUnlessSame(recv, input(call_.root), b);
        break;
      case Collective::AllGather:
        for (int g = 0; g < n_; ++g) {
          if (g != skip) copyUnlessSame(recv + g * b, input(g), b);
        }
        break;
      case Collective::ReduceScatter: reduceInto(recv, r * b); break;
      case Collective::AllToAll:
        for (int g = 0; g < n_; ++g) {
          if (g != skip) copyUnlessSame(recv + g * b, input(g) + r * b, b);
        }
        break;
      case Collective::SendRecv: break;
    }
  }

  const EagerCall& call_;
  const ExecEnv& env_;
  shm::ShmWorld* world_;
  const int me_;
  const int n_;
  const int size_;  // members of the local group
  const uint64_t elt_;
  std::vector<const void*>& srcs_;
  void* const* slots_;  // every member's slot, parity 0 then 1
  const int parity_;    // this call's
  int next_ = 0;
  const uint8_t myCpu_ = cpuHint(env_);
  int remotePolls_ = 0;
  bool progressTimed_ = false;  // lastProgress_ holds a time since the last progress
  Clock::time_point lastProgress_{};
  Clock::time_point lastLiveness_{};
};

}  // namespace

uint64_t eagerCapacity() { return sizeof(shm::EagerSlot::payload); }

uint64_t autoEagerBytes(int localRanks) {
  // Measured on 2 and 4 ranks (docs/performance-method.md, "Small calls"); beyond 4, halved so that the
  // n inputs an eager rank reads stay near 256 KiB, no less than the 16 KiB measured before.
  const uint64_t kib = localRanks <= 4 ? 64 : localRanks <= 8 ? 32 : 16;
  return std::min<uint64_t>(kib << 10, eagerCapacity());
}

uint64_t eagerInputBytes(Collective coll, uint64_t count, uint32_t eltSize, int nranks) {
  const uint64_t n = nranks > 0 ? static_cast<uint64_t>(nranks) : 1;
  // Overflow checked by multiplying (two 64-bit divisions per call showed in an 8-byte call's profile).
  uint64_t b = 0, all = 0;
  if (eltSize == 0 || __builtin_mul_overflow(count, uint64_t{eltSize}, &b) || __builtin_mul_overflow(b, n, &all)) {
    return UINT64_MAX;
  }
  switch (coll) {
    case Collective::ReduceScatter:
    case Collective::AllToAll: return all;
    case Collective::SendRecv: return 0;
    default: return b;
  }
}

Status runEager(const EagerCall& call, shm::ShmWorld& world, const ExecEnv& env, ExecWorkspace& work) {
  return EagerRun(call, world, env, work).run();
}

}  // namespace conflux
