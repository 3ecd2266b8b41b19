// ShmWorld: setup of the local shared-memory world (create, exchange, map, unlink) and the small
// control-plane operations (barrier, doorbells, error slot, call descriptors, liveness).
//
// Setup sequence (every local rank):
//   1. create own segment "<dir>/conflux-<jobTag>-<localRank>" (O_EXCL, 0600), pre-fault, fill the
//      control block;
//   2. all-gather {ok, pid, segment size, pid namespace, failure text};
//   3. open and map every peer's segment, check its layout;
//   4. all-gather {ok, failure text}: this is the "everyone has mapped" barrier, and it also carries
//      failures, so that one rank's failure makes every rank throw instead of hanging in a barrier;
//   5. unlink own segment, then LocalExchange::barrier(): once create() returns on any rank, no segment
//      of this world is left in the directory.
// Any failure unmaps and unlinks through RAII (Segment) before the Error leaves create().
#include "transport/shm/shm_world.h"

#include "transport/transport.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <tuple>

#include "core/error.h"
#include "core/log.h"
#include "transport/shm/channel.h"
#include "transport/shm/cross_memory.h"
#include "transport/shm/doorbell.h"
#include "transport/shm/layout.h"
#include "transport/shm/liveness.h"
#include "transport/shm/segment.h"

namespace conflux::shm {
namespace {

/// What each rank contributes to a setup all-gather (same size everywhere; plain bytes).
struct ExchangeRecord {
  uint32_t ok = 1;
  int32_t code = 0;  ///< conflux::Code of the failure when !ok.
  uint64_t pid = 0;
  uint64_t segmentBytes = 0;
  uint64_t pidNsDev = 0;  ///< Pid namespace identity (0: unknown): liveness only works within one.
  uint64_t pidNsIno = 0;
  uint64_t probeAddress = 0;  ///< crossMemoryProbeAddress() in the sender's process.
  uint32_t readsPeers = 0;    ///< Second exchange: the sender read every peer's probe word (cross_memory.h).
  char message[256] = {};
};

std::vector<ExchangeRecord> allGather(const LocalExchange& ex, const ExchangeRecord& mine, int localSize) {
  std::vector<uint8_t> bytes(sizeof mine);
  std::memcpy(bytes.data(), &mine, sizeof mine);
  const std::vector<uint8_t> all = ex.allGather(bytes);
  if (all.size() != sizeof mine * static_cast<size_t>(localSize))
    throw Error(Code::InternalError, "shm: local all-gather returned " + std::to_string(all.size()) +
                                         " bytes, expected " + std::to_string(sizeof mine * localSize));
  std::vector<ExchangeRecord> out(static_cast<size_t>(localSize));
  std::memcpy(out.data(), all.data(), all.size());
  return out;
}

void markFailed(ExchangeRecord& rec, std::optional<Error>& own, const Error& e) {
  own = e;  // rethrown in full; peers get the (possibly truncated) text
  rec.ok = 0;
  rec.code = static_cast<int32_t>(e.code());
  std::snprintf(rec.message, sizeof rec.message, "%s", e.what());
}

void validate(const ShmConfig& cfg) {
  auto bad = [](const std::string& what) { throw Error(Code::InvalidArgument, "shm: " + what); };
  if (cfg.localSize < 1) bad("localSize must be >= 1");
  if (cfg.localRank < 0 || cfg.localRank >= cfg.localSize) bad("localRank out of range");
  if (!cfg.globalRanks.empty() && cfg.globalRanks.size() != static_cast<size_t>(cfg.localSize))
    bad("globalRanks must be empty or have localSize entries");
  if (cfg.jobTag.empty() || cfg.jobTag.size() > 64) bad("jobTag must have 1..64 characters");
  for (char c : cfg.jobTag)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'))
      bad("jobTag may only hold letters, digits, '-' and '_'");
  if (cfg.dir.empty()) bad("empty shm directory (CONFLUX_SHM_DIR)");
  constexpr size_t kMax = size_t{1} << 40;
  if (cfg.channelBytes > kMax || cfg.stagingBytes > kMax) bad("channel or staging size too large");
}

std::pair<uint64_t, uint64_t> pidNamespace() {
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) != 0) return {0, 0};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

class ShmWorldImpl final : public ShmWorld {
 public:
  ShmWorldImpl(const ShmConfig& cfg, const SegmentLayout& layout)
      : cfg_(cfg), layout_(layout), segs_(static_cast<size_t>(cfg.localSize)) {}

  std::string segmentPath(int rank) const {
    return cfg_.dir + "/conflux-" + cfg_.jobTag + "-" + std::to_string(rank);
  }
  int globalRank(int rank) const { return cfg_.globalRanks.empty() ? rank : cfg_.globalRanks[rank]; }

  /// Step 1: create, pre-fault and initialize own segment.
  void createOwn() {
    Segment& own = segs_[me()];
    own = Segment::create(segmentPath(me()), layout_.totalBytes);
    // The file is fresh and zero-filled; construct the control block (all atomics zero) in place.
    auto* cb = new (own.data()) ControlBlock{};
    cb->info = SegmentInfo{kSegmentMagic, kLayoutVersion, cfg_.localRank, cfg_.localSize,
                           static_cast<int32_t>(::getpid()), layout_.totalBytes, layout_.channelCapacity,
                           layout_.stagingStride};
    for (int s = 0; s < cfg_.localSize; ++s)
      if (s != me()) new (own.data() + layout_.channelOffset(me(), s)) ChannelHeader{};
    for (int parity = 0; parity < 2; ++parity) new (own.data() + kPageBytes + parity * kEagerSlotBytes) EagerSlot{};
  }

  /// Step 3: map every peer's segment and check that it was laid out like ours.
  void mapPeers(const std::vector<ExchangeRecord>& recs) {
    for (int r = 0; r < cfg_.localSize; ++r) {
      if (r == me()) continue;
      if (recs[r].segmentBytes != layout_.totalBytes)
        throw Error(Code::InvalidArgument,
                    "shm: local rank " + std::to_string(r) + " uses a different segment size (" +
                        std::to_string(recs[r].segmentBytes) + " vs " + std::to_string(layout_.totalBytes) +
                        "): CONFLUX_SHM_CHANNEL_BYTES / CONFLUX_SHM_STAGING_BYTES differ between ranks?");
      segs_[r] = Segment::open(segmentPath(r), layout_.totalBytes);
      const SegmentInfo& info = control(r).info;
      if (info.magic != kSegmentMagic || info.version != kLayoutVersion || info.localRank != r ||
          info.localSize != cfg_.localSize || info.channelCapacity != layout_.channelCapacity ||
          info.stagingStride != layout_.stagingStride)
        throw Error(Code::InvalidArgument, "shm: segment " + segmentPath(r) + " has an unexpected layout");
    }
  }

  /// Step 3b: whether this rank can read every peer's memory with process_vm_readv (cross_memory.h).
  bool probeCrossMemory(const std::vector<ExchangeRecord>& recs) const {
    if (!cfg_.crossMemory) return false;
    const auto ns = pidNamespace();
    for (int r = 0; r < cfg_.localSize; ++r) {
      if (r == me()) continue;
      const bool sameNs = ns.second != 0 && recs[r].pidNsDev == ns.first && recs[r].pidNsIno == ns.second;
      std::string why;
      if (!sameNs) why = "it is in another pid namespace";
      if (sameNs && canReadPeerMemory(static_cast<pid_t>(recs[r].pid), recs[r].probeAddress, why)) continue;
      CFX_INFO(kShm, "shm: local rank %d cannot read local rank %d's memory directly (%s): private buffers are staged",
               me(), r, why.c_str());
      return false;
    }
    return true;
  }

  /// Step 5 (after the mapped barrier): unlink own name, build channels, watch peers.
  void finish(const std::vector<ExchangeRecord>& recs) {
    segs_[me()].unlink();
    send_.resize(segs_.size());
    recv_.resize(segs_.size());
    std::vector<pid_t> pids(segs_.size(), 0);
    const auto ns = pidNamespace();
    for (int r = 0; r < cfg_.localSize; ++r) {
      if (r == me()) continue;
      send_[r] = std::make_unique<ShmSendChannel>(channelHeader(r, me()), channelRing(r, me()),
                                                  layout_.channelCapacity, &control(r).bell);
      recv_[r] = std::make_unique<ShmRecvChannel>(channelHeader(me(), r), channelRing(me(), r),
                                                  layout_.channelCapacity, &control(r).bell);
      const bool nsKnown = ns.second != 0 && recs[r].pidNsIno != 0;
      const bool sameNs = !nsKnown || (recs[r].pidNsDev == ns.first && recs[r].pidNsIno == ns.second);
      if (sameNs) pids[r] = static_cast<pid_t>(recs[r].pid);
      else CFX_INFO(kShm, "shm: local rank %d is in another pid namespace; its liveness is not watched", r);
    }
    liveness_.watch(pids);
    pids_ = pids;
    pids_[me()] = ::getpid();
  }

  int localRank() const override { return cfg_.localRank; }
  int localSize() const override { return cfg_.localSize; }

  SendChannel& sendTo(int localPeer) override { return *send_[checkPeer(localPeer)]; }
  RecvChannel& recvFrom(int localPeer) override { return *recv_[checkPeer(localPeer)]; }

  std::byte* staging(int localPeer, uint64_t epoch) override {
    return segs_[checkRank(localPeer)].data() + layout_.stagingOffset + (epoch & 1) * layout_.stagingStride;
  }
  size_t stagingBytes() const override { return static_cast<size_t>(layout_.stagingStride); }

  uint64_t barrierArrive() override {
    const uint64_t gen = ++barrierGen_;
    // The store is a release: what this rank wrote before arriving (e.g. into staging) is visible to a
    // peer whose acquire load in barrierReached() sees the new count. Only this rank stores the word.
    // Waiters only care about completion, so only a rank that completes the generation rings the others
    // (one wake-up per waiter per barrier instead of one per arrival). Two ranks arriving last at the
    // same time: store and loads are seq_cst, so they are totally ordered and at least one of the two
    // sees the other's arrival (the Dekker argument) and rings.
    // The stamp first: a peer that sees this arrival reads it, or a later arrival's (another tag).
    control(me()).barrier.stamp[gen & 1].store(barrierStamp(gen, steadyNs()), std::memory_order_relaxed);
    control(me()).barrier.arrived.store(gen, std::memory_order_seq_cst);
    if (arrivedAll(gen, std::memory_order_seq_cst)) {
      for (int r = 0; r < cfg_.localSize; ++r)
        if (r != me()) ringDoorbell(control(r).bell);
    }
    return gen;
  }

  bool barrierReached(uint64_t generation) const override {
    // Acquire pairs with the arrivals' release: peers' pre-barrier writes are visible afterwards.
    return arrivedAll(generation, std::memory_order_acquire);
  }

  void noteBarrierSeen(uint64_t generation) override {
    // The peers' stamps of this generation: the latest is the last arrival (core_distance.h).
    stamps_.clear();
    for (int r = 0; r < cfg_.localSize; ++r) {
      if (r != me()) stamps_.push_back(control(r).barrier.stamp[generation & 1].load(std::memory_order_relaxed));
    }
    const auto now = static_cast<int64_t>(steadyNs());
    const int64_t sample = handoffSample(stamps_.data(), static_cast<int>(stamps_.size()), generation, static_cast<uint64_t>(now));
    if (distance_.add(sample, now)) {
      CFX_INFO(kTuning, "local rank %d: the cores are %s now (lowest of the last %d barrier handoffs: %lld ns)", me(),
               distance_.far(now) ? "far apart" : "close together", CoreDistance::kWindow,
               static_cast<long long>(distance_.lowest()));
    }
  }

  bool coresFarApart() const override { return distance_.far(static_cast<int64_t>(steadyNs())); }
  const CoreDistance& coreDistance() const override { return distance_; }

  bool barrierReachedBy(int localPeer, uint64_t generation) const override {
    return control(checkRank(localPeer)).barrier.arrived.load(std::memory_order_acquire) >= generation;
  }

  int barrierLaggard(uint64_t generation) const override {
    for (int r = 0; r < cfg_.localSize; ++r)
      if (control(r).barrier.arrived.load(std::memory_order_acquire) < generation) return r;
    return -1;
  }

  uint32_t doorbell() const override { return readDoorbell(control(me()).bell); }
  void sleep(uint32_t seen, int timeoutMs) override { sleepOnDoorbell(control(me()).bell, seen, timeoutMs); }
  void wakeSelf() override { ringDoorbell(control(me()).bell); }
  void wakePeer(int localPeer) override { ringDoorbell(control(checkRank(localPeer)).bell); }

  std::vector<int> deadPeers() override { return liveness_.allDead(); }
  std::vector<int> stoppedPeers() override { return liveness_.allStopped(); }

  EagerSlot& eagerSlot(int localRank, int parity) override {
    std::byte* p = segs_[checkRank(localRank)].data() + kPageBytes + static_cast<size_t>(parity & 1) * kEagerSlotBytes;
    return *std::launder(reinterpret_cast<EagerSlot*>(p));
  }
  DirectSlot& directSlot(int localRank) override { return control(checkRank(localRank)).direct; }
  int pidOf(int localRank) const override { return pids_[checkRank(localRank)]; }
  bool crossMemory() const override { return crossMemory_; }
  void setCrossMemory(bool on) { crossMemory_ = on; }

  void wakeSleepingPeers() override {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (int r = 0; r < cfg_.localSize; ++r)
      if (r != me()) ringIfSleeping(control(r).bell);
  }
  void sleepUnless(const std::function<bool()>& ready, int timeoutMs) override {
    shm::sleepUnless(control(me()).bell, ready, timeoutMs);
  }

  void postError(const SharedError& err) override {
    for (int r = 0; r < cfg_.localSize; ++r) {
      ErrorSlot& slot = control(r).error;
      uint32_t expected = kErrorEmpty;
      // Claiming only needs atomicity (relaxed): the loser touches nothing else, and the winner's field
      // writes are published by the release store below.
      if (!slot.state.compare_exchange_strong(expected, kErrorWriting, std::memory_order_relaxed)) continue;
      slot.code = err.code;
      slot.failedRank = err.failedRank;
      slot.reporterRank = err.reporterRank;
      std::snprintf(slot.message, sizeof slot.message, "%s", err.message.c_str());
      slot.state.store(kErrorPosted, std::memory_order_release);
    }
    for (int r = 0; r < cfg_.localSize; ++r) ringDoorbell(control(r).bell);
  }

  std::optional<SharedError> error() const override {
    const ErrorSlot& slot = control(me()).error;
    // Acquire pairs with the poster's release store: the fields are complete once we see kErrorPosted.
    if (slot.state.load(std::memory_order_acquire) != kErrorPosted) return std::nullopt;
    return SharedError{slot.code, slot.failedRank, slot.reporterRank,
                       std::string(slot.message, strnlen(slot.message, sizeof slot.message))};
  }

  // A count the stamp saturates must be one the executor passes on no further.
  static_assert(transport::MessageTransport::kMaxProgressHops < (1u << ProgressWord::kProgressHopBits));
  void publishProgress(int64_t steadyNs, uint64_t call, uint32_t hops) override {
    ProgressWord& w = control(me()).progress;
    if (w.call.load(std::memory_order_relaxed) != call) {
      // The old call's stamp goes before the new call is stored (release): a reader that sees the new
      // call sees no stamp of the old one; and the new call before the new stamp (the fence), so a
      // reader that sees the new stamp sees the new call.
      w.stamp.store(0, std::memory_order_relaxed);
      w.call.store(call, std::memory_order_release);
      std::atomic_thread_fence(std::memory_order_release);
    }
    constexpr uint32_t kHopMax = (1u << ProgressWord::kProgressHopBits) - 1;
    const uint64_t ns = std::min(uint64_t(std::max<int64_t>(steadyNs, 0)), ProgressWord::kTimeMask);
    if (ns > (w.stamp.load(std::memory_order_relaxed) & ProgressWord::kTimeMask)) {
      w.stamp.store(uint64_t(std::min(hops, kHopMax)) << ProgressWord::kProgressTimeBits | ns, std::memory_order_release);
    }
  }
  PeerProgress peerProgress(int localPeer, uint64_t call) const override {
    const ProgressWord& w = control(checkRank(localPeer)).progress;
    if (w.call.load(std::memory_order_acquire) != call) return {};
    const uint64_t stamp = w.stamp.load(std::memory_order_acquire);
    // A stamp read after the call moved on may be the next call's: then it is not this call's progress.
    if (w.call.load(std::memory_order_relaxed) != call) return {};
    return PeerProgress{int64_t(stamp & ProgressWord::kTimeMask), uint32_t(stamp >> ProgressWord::kProgressTimeBits)};
  }
  void publishCompleted(uint64_t seq) override {
    std::atomic<uint64_t>& w = control(me()).progress.completedCall;
    if (seq > w.load(std::memory_order_relaxed)) w.store(seq, std::memory_order_release);
  }
  uint64_t peerCompleted(int localPeer) const override {
    return control(checkRank(localPeer)).progress.completedCall.load(std::memory_order_acquire);
  }

  void publishCall(const CallDescriptor& d) override {
    CallSlot& s = control(me()).calls[d.seq % kCallSlots];
    // Seqlock write: invalidate, fence (release) so the invalidation is visible before any new field,
    // write the fields, then publish the call number with release.
    s.seq.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s.count.store(d.count, std::memory_order_relaxed);
    s.coll.store(d.coll, std::memory_order_relaxed);
    s.dtype.store(d.dtype, std::memory_order_relaxed);
    s.op.store(d.op, std::memory_order_relaxed);
    s.root.store(d.root, std::memory_order_relaxed);
    s.seq.store(d.seq, std::memory_order_release);
  }

  std::optional<CallDescriptor> peerCall(int localPeer, uint64_t seq) const override {
    if (seq == 0) return std::nullopt;
    const CallSlot& s = control(checkRank(localPeer)).calls[seq % kCallSlots];
    // Seqlock read: acquire the call number, read the fields, acquire fence, re-check the number; a
    // concurrent overwrite changes it (to 0 or a later call), and then the fields are discarded.
    if (s.seq.load(std::memory_order_acquire) != seq) return std::nullopt;
    CallDescriptor d;
    d.seq = seq;
    d.count = s.count.load(std::memory_order_relaxed);
    d.coll = s.coll.load(std::memory_order_relaxed);
    d.dtype = s.dtype.load(std::memory_order_relaxed);
    d.op = s.op.load(std::memory_order_relaxed);
    d.root = s.root.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) != seq) return std::nullopt;
    return d;
  }

 private:
  int me() const { return cfg_.localRank; }
  static uint64_t steadyNs() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  }
  bool arrivedAll(uint64_t generation, std::memory_order order) const {
    for (int r = 0; r < cfg_.localSize; ++r)
      if (control(r).barrier.arrived.load(order) < generation) return false;
    return true;
  }
  int checkRank(int r) const {
    if (r < 0 || r >= cfg_.localSize)
      throw Error(Code::InvalidArgument, "shm: local rank " + std::to_string(r) + " out of range");
    return r;
  }
  int checkPeer(int r) const {
    if (checkRank(r) == me()) throw Error(Code::InvalidArgument, "shm: no channel from a rank to itself");
    return r;
  }
  ControlBlock& control(int r) const {
    return *std::launder(reinterpret_cast<ControlBlock*>(segs_[r].data()));
  }
  ChannelHeader* channelHeader(int receiver, int sender) const {
    std::byte* p = segs_[receiver].data() + layout_.channelOffset(receiver, sender);
    return std::launder(reinterpret_cast<ChannelHeader*>(p));
  }
  std::byte* channelRing(int receiver, int sender) const {
    return segs_[receiver].data() + layout_.channelOffset(receiver, sender) + kChannelHeaderBytes;
  }

  ShmConfig cfg_;
  SegmentLayout layout_;
  std::vector<Segment> segs_;  ///< Index = local rank, own included. Destroyed last (channels point into it).
  std::vector<std::unique_ptr<ShmSendChannel>> send_;
  std::vector<std::unique_ptr<ShmRecvChannel>> recv_;
  PeerLiveness liveness_;
  std::vector<pid_t> pids_;    ///< By local rank; 0 for a peer in another pid namespace.
  uint64_t barrierGen_ = 0;
  CoreDistance distance_;      ///< From this rank's barrier waits (noteBarrierSeen).
  std::vector<uint64_t> stamps_;  ///< noteBarrierSeen's peers' stamps (kept: no allocation per barrier).
  bool crossMemory_ = false;   ///< Every local rank can read every other's memory (process_vm_readv).
};

/// Throws this rank's own failure first, else the first failed peer's.
void throwIfAnyFailed(const std::vector<ExchangeRecord>& recs, const ShmConfig& cfg,
                      const std::optional<Error>& own, const char* step) {
  if (own) throw *own;
  for (size_t r = 0; r < recs.size(); ++r) {
    if (recs[r].ok) continue;
    const int global = cfg.globalRanks.empty() ? static_cast<int>(r) : cfg.globalRanks[r];
    throw Error(Code::RemoteError, "shm: local rank " + std::to_string(r) + " (rank " + std::to_string(global) +
                                       ") failed to " + step + ": " + recs[r].message);
  }
}

}  // namespace

std::unique_ptr<ShmWorld> ShmWorld::create(const ShmConfig& cfg, const LocalExchange& ex) {
  validate(cfg);
  const auto start = std::chrono::steady_clock::now();
  const SegmentLayout layout = computeLayout(cfg.localSize, cfg.channelBytes, cfg.stagingBytes);
  auto world = std::make_unique<ShmWorldImpl>(cfg, layout);

  ExchangeRecord mine;
  mine.pid = static_cast<uint64_t>(::getpid());
  mine.segmentBytes = layout.totalBytes;
  std::tie(mine.pidNsDev, mine.pidNsIno) = pidNamespace();
  mine.probeAddress = crossMemoryProbeAddress();
  std::optional<Error> failure;
  try {
    world->createOwn();
  } catch (const Error& e) {
    markFailed(mine, failure, e);  // still take part in the exchange, so that every rank fails, none hangs
  }
  const std::vector<ExchangeRecord> recs = allGather(ex, mine, cfg.localSize);
  throwIfAnyFailed(recs, cfg, failure, "create its segment");

  ExchangeRecord mapped;
  try {
    world->mapPeers(recs);
    mapped.readsPeers = world->probeCrossMemory(recs) ? 1 : 0;
  } catch (const Error& e) {
    markFailed(mapped, failure, e);
  }
  const std::vector<ExchangeRecord> mappedRecs = allGather(ex, mapped, cfg.localSize);
  throwIfAnyFailed(mappedRecs, cfg, failure, "map the segments of its peers");
  // One answer for all: a call reads peers' memory only when every rank can (the plans must agree).
  world->setCrossMemory(cfg.localSize > 1 &&
                        std::all_of(mappedRecs.begin(), mappedRecs.end(), [](const ExchangeRecord& r) { return r.readsPeers != 0; }));

  world->finish(recs);
  ex.barrier();  // every rank has unlinked its own segment

  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  CFX_INFO(kShm, "shm: local rank %d/%d ready in %.1f ms: segment %llu bytes (%llu channels x %llu, staging 2 x %llu), single-copy reads %s",
           cfg.localRank, cfg.localSize, ms, static_cast<unsigned long long>(layout.totalBytes),
           static_cast<unsigned long long>(layout.channelCount),
           static_cast<unsigned long long>(layout.channelCapacity),
           static_cast<unsigned long long>(layout.stagingStride), world->crossMemory() ? "on" : "off");
  return world;
}

}  // namespace conflux::shm
