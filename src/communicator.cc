// The communicator's set-up (init: host identity, shared memory, the network, the plan-cache and eager
// settings), teardown, abort and its sticky error. The call runner is communicator_call.cc; split and
// createGroup are communicator_split.cc.
#include "src/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "src/eager.h"
#include "core/bootstrap/bootstrap.h"
#include "core/bootstrap/store_client.h"
#include "core/bootstrap/store_server.h"
#include "core/bootstrap/unique_id.h"
#include "core/config.h"
#include "core/cpu_budget.h"
#include "core/host_id.h"
#include "core/log.h"
#include "core/metrics/service.h"
#if CONFLUX_HAVE_CUDA
#include "src/device_call.h"
#endif
#include "src/cost_probe.h"
#include "src/peer_links.h"
#include "src/wait.h"
#include "core/transport_select.h"
#include "transport/network.h"

namespace conflux {
namespace {

// What every rank tells the others at init (pids travel in the shared-memory setup, which needs them).
struct PeerInfo {
  char hostId[240];
  char machineId[64];  // the kernel: simulated nodes on one machine share its CPUs
  sockaddr_storage recovery;  // this rank's recovery point (src/recovery_point.h); family 0: none
  CpuShare cpus;              // the CPUs this rank may use (core/cpu_budget.h)
  // The settings every rank's plans must share (a rank building other plans would wait for messages that
  // never come): CONFLUX_CHUNK_BYTES and CONFLUX_RHD_RADIX (0: auto).
  uint64_t chunkBytes;
  int64_t radix;
};
// Exchanged as bytes between ranks of one build: no pointers, no padding that differs.
static_assert(std::is_trivially_copyable_v<PeerInfo>);
static_assert(sizeof(CpuShare) == 128 + CpuShare::kMaxQuotas * 16, "CpuShare has no padding");

/// The first difference between this rank's plan setting and rank `rank`'s, as an error message ("" when
/// alike). Every rank sees every rank's settings after the exchange, so every rank finds one.
std::string differs(const char* variable, const std::string& mine, const std::string& theirs, int rank) {
  if (mine == theirs) return "";
  return std::string(variable) + " differs between ranks: " + mine + " here, " + theirs + " on rank " +
         std::to_string(rank) + " (every rank builds the same plans: set it alike on all of them)";
}

std::string chunkSetting(uint64_t chunkBytes) { return chunkBytes == 0 ? "auto" : std::to_string(chunkBytes); }
std::string radixSetting(int radix) { return radix == 0 ? "auto" : std::to_string(radix); }

std::vector<uint8_t> toBytes(const PeerInfo& info) {
  std::vector<uint8_t> v(sizeof info);
  std::memcpy(v.data(), &info, sizeof info);
  return v;
}

}  // namespace

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::create(const bootstrap::UniqueId& id, int nranks, int rank,
                                                           std::shared_ptr<bootstrap::StoreServer> server,
                                                           const CommOptions& options) {
  std::unique_ptr<CommunicatorImpl> comm(new CommunicatorImpl());
  comm->init(id, nranks, rank, std::move(server), options);
  return comm;
}

CommunicatorImpl::~CommunicatorImpl() {
  // The metrics first: leaving the service writes the file output with this communicator's final values.
  if (metrics_ != nullptr) metrics::removeSource(metrics_.get());
  // Destroyed in error before any dump was written (a failure no call of this rank saw, such as a
  // peer's while this rank was between calls): one now.
  if (recorder_ != nullptr && !dumped_.load()) {
    if (Status e = asyncError(); !e) {
      recorder_->noteError(e, postedFailedRank());
      recorder_->dump("destroy");
    }
  }
  if (net_ == nullptr) return;
  if (hasError_.load()) {
    announceOnce();  // an abort() that no call saw: the other nodes still learn of it before the sockets close
    // A failed call may have left receives posted into scratch_ and work_, and the network may outlive
    // this communicator (split children share it, the parent's or their own): those buffers stay with it
    // until nothing can touch them, and a shared view's messages are not given to a later child.
    net_->retire(std::make_shared<std::pair<std::vector<std::byte>, ExecWorkspace>>(std::move(scratch_), std::move(work_)));
  } else {
    // Nothing is posted: the buffers go, and with them any registration of them in a shared cache.
    net_->forget(scratch_.data(), scratch_.size());
    net_->forget(work_.bounce.data(), work_.bounce.size());
  }
}

void CommunicatorImpl::init(const bootstrap::UniqueId& id, int nranks, int rank,
                            std::shared_ptr<bootstrap::StoreServer> server, const CommOptions& options) {
  rank_ = rank;
  nranks_ = nranks;
  name_ = options.name;
  log::reloadConfig();  // CONFLUX_DEBUG may have changed since the process first logged
  log::setThreadRank(rank);
  const int timeoutMs = options.timeoutMs >= 0 ? options.timeoutMs
                                               : static_cast<int>(config::getInt(config::Var::TIMEOUT_MS));
  selector_ = Selector(config::getString(config::Var::ALGO));
  // Every rank builds its plans with this chunk, so it must be alike on all of them (as NCCL's variables);
  // read before the bootstrap, so that a bad value fails every rank alike.
  // "auto" keeps the default and lets the cost model pick the hierarchical all-reduces' chunk (cost_probe.cc).
  chooseChunk_ = config::getString(config::Var::CHUNK_BYTES) == "auto";
  // "auto" keeps radix 2 as the plans' key and lets the cost model pick rhd's radix per call.
  chooseRadix_ = config::getString(config::Var::RHD_RADIX) == "auto";
  if (!chooseRadix_) {
    const int64_t radix = config::getInt(config::Var::RHD_RADIX);
    if (radix < 2 || radix > kMaxRhdRadix) {
      throw Error(Code::InvalidArgument, "CONFLUX_RHD_RADIX=" + std::to_string(radix) + ": must be 2 to " +
                                             std::to_string(kMaxRhdRadix) + ", or auto");
    }
    radix_ = static_cast<int>(radix);
  }
  const int64_t windowRounds = config::getInt(config::Var::EXEC_WINDOW);
  if (windowRounds < 1 || windowRounds > 4096) {
    throw Error(Code::InvalidArgument, "CONFLUX_EXEC_WINDOW=" + std::to_string(windowRounds) + ": must be 1 to 4096");
  }
  (void)SingleCopyPolicy::fromConfig(true);  // CONFLUX_SHM_CMA and its size checked before the bootstrap too
  const int64_t spinUs = config::getInt(config::Var::SPIN_US);
  if (spinUs < 0 || spinUs > kMaxSpinUs) {
    throw Error(Code::InvalidArgument, "CONFLUX_SPIN_US=" + std::to_string(spinUs) + ": must be 0 to " +
                                           std::to_string(kMaxSpinUs));
  }
  if (chooseChunk_) {
    chunkBytes_ = kPipelineChunkBytes;
  } else if (const int64_t chunk = config::getInt(config::Var::CHUNK_BYTES); chunk < 4096 || chunk > (int64_t{1} << 30)) {
    throw Error(Code::InvalidArgument, "CONFLUX_CHUNK_BYTES=" + std::to_string(chunk) + ": must be 4096 to 1073741824, or auto");
  } else {
    chunkBytes_ = static_cast<uint64_t>(chunk);
  }

  const int joinTimeoutMs = options.joinTimeoutMs >= 0 ? options.joinTimeoutMs : timeoutMs;
  auto client = std::make_unique<bootstrap::StoreClient>(id, std::chrono::milliseconds(joinTimeoutMs));
  bootstrap::Bootstrap boot(std::move(client), rank, nranks, "comm");

  // Who is where, and where each rank's recovery point listens.
  recovery_ = RecoveryPoint::open(id);
  PeerInfo mine{};
  mine.recovery = recovery_.address();
  std::string host = hostIdentity();
  std::strncpy(mine.hostId, host.c_str(), sizeof mine.hostId - 1);
  std::strncpy(mine.machineId, machineIdentity().c_str(), sizeof mine.machineId - 1);
  mine.cpus = myCpuShare();
  mine.chunkBytes = chooseChunk_ ? 0 : chunkBytes_;
  mine.radix = chooseRadix_ ? 0 : radix_;
  std::vector<uint8_t> all = boot.allGather(toBytes(mine));
  std::vector<std::string> hosts(nranks);
  std::vector<CpuShare> cpusOnMachine;
  std::string mismatch;
  recoveryPoints_.resize(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    PeerInfo p;
    std::memcpy(&p, all.data() + r * sizeof(PeerInfo), sizeof p);
    recoveryPoints_[static_cast<size_t>(r)] = p.recovery;
    p.hostId[sizeof p.hostId - 1] = '\0';
    p.machineId[sizeof p.machineId - 1] = '\0';
    hosts[r] = p.hostId;
    if (std::strncmp(p.machineId, mine.machineId, sizeof p.machineId) == 0) cpusOnMachine.push_back(p.cpus);
    if (mismatch.empty()) mismatch = differs("CONFLUX_RHD_RADIX", radixSetting(mine.radix), radixSetting(p.radix), r);
    if (mismatch.empty()) {
      mismatch = differs("CONFLUX_CHUNK_BYTES", chunkSetting(mine.chunkBytes), chunkSetting(p.chunkBytes), r);
    }
  }
  if (!mismatch.empty()) {
    // Every rank fails here: all leave the store first, so that the rank hosting it strands nobody. A
    // rank that died meanwhile makes that time out; the setting that differs is still the error to report.
    try {
      boot.finish(server != nullptr);
    } catch (const Error& e) {
      CFX_WARN(kInit, "rank %d: leaving the bootstrap store after a setting that differs: %s", rank, e.what());
    }
    throw Error(Code::InvalidArgument, mismatch);
  }
  LocalLayout layout = computeLocalLayout(hosts, rank);
  // Ranks of every node, for the hierarchical algorithms (nodes numbered by first appearance).
  nodeLayout_ = std::make_shared<const NodeLayout>(NodeLayout::fromNodeOf(hosts));
  localRank_ = layout.localRank;
  localSize_ = layout.localSize;
  numNodes_ = layout.numNodes;
  ranksOnMachine_ = std::max(static_cast<int>(cpusOnMachine.size()), localSize_);  // should machine ids undercount
  CpuFit cpuFit = fitOnMachine(cpusOnMachine, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  cpuFit.ranks = ranksOnMachine_;

  // The flight recorder (src/flight_recorder.h): its id is the same on every rank of this communicator.
  TraceIdentity trace;
  trace.commId = bootstrap::jobTag(id);
  trace.name = name_;
  trace.rank = rank_;
  trace.nranks = nranks_;
  trace.localRank = localRank_;
  trace.localSize = localSize_;
  trace.node = layout.nodeIndex;
  trace.nodes = numNodes_;
  trace.host = hostName();
  const int64_t traceEntries = config::getInt(config::Var::TRACE_ENTRIES);
  recorder_ = std::make_unique<FlightRecorder>(std::move(trace), static_cast<size_t>(std::max<int64_t>(0, traceEntries)),
                                               config::getString(config::Var::TRACE_DIR));
  eagerAlgorithm_ = recorder_->internAlgorithm("eager");
  p2pAlgorithm_ = recorder_->internAlgorithm("p2p");
  singleCopyAlgorithm_ = recorder_->internAlgorithm("direct_cma");
  deviceAlgorithm_ = recorder_->internAlgorithm("device");
  if (config::getBool(config::Var::TRACE_SIGNAL)) FlightRecorder::installSignalDump();
  // Metrics (src/comm_metrics.h): the first communicator of the process starts the service and names
  // the process (its rank, local rank and host label every sample). Started here, before any other
  // rank waits on this one, so that a malformed address fails init at once; counted from below.
  // The identity (launcher variables, the host name) is read only when metrics are asked for.
  const bool metricsOn = metrics::requested() && metrics::start(metrics::identityFromLauncher(rank_, localRank_));

  // Parsed before the segments exist: a malformed value fails here, before peers wait on this rank.
  const ExecEnv::StreamStaging streamStaging = streamStagingFromConfig();

  // Shared memory among the ranks of this node.
  shm::ShmConfig cfg;
  cfg.dir = config::getString(config::Var::SHM_DIR);
  cfg.jobTag = bootstrap::jobTag(id);
  // Nodes of one job may share /dev/shm (simulated nodes: network namespaces of one machine), so segment
  // names carry the node's index when ranks span nodes.
  if (numNodes_ > 1) cfg.jobTag += "-n" + std::to_string(layout.nodeIndex);
  cfg.localRank = localRank_;
  cfg.localSize = localSize_;
  cfg.globalRanks = layout.localRanks;
  cfg.channelBytes = static_cast<size_t>(config::getInt(config::Var::SHM_CHANNEL_BYTES));
  cfg.stagingBytes = static_cast<size_t>(config::getInt(config::Var::SHM_STAGING_BYTES));
  cfg.crossMemory = SingleCopyPolicy::wanted() && config::getBool(config::Var::DIRECT) && numNodes_ == 1;
  const transport::BlobAllGather allGather = [&](const std::vector<uint8_t>& v) { return boot.allGather(v); };
  const transport::BlobAllGather localAllGather = [&](const std::vector<uint8_t>& v) {
    return boot.allGatherAmong(layout.localRanks, v);
  };
  shm::LocalExchange ex;
  ex.allGather = localAllGather;
  ex.barrier = [&] { boot.barrierAmong(layout.localRanks); };
  world_ = shm::ShmWorld::create(cfg, ex);
  stagingBytes_ = world_->stagingBytes();

  if (numNodes_ > 1) {
    openNetwork(layout.localRanks, options, timeoutMs, allGather, localAllGather);
    setCostModel(options, timeoutMs, allGather);
  }

  env_.local = world_.get();
  env_.rank = rank_;
  env_.nranks = nranks_;
  env_.localIndex.assign(nranks_, -1);
  env_.globalOfLocal = layout.localRanks;
  for (int l = 0; l < localSize_; ++l) env_.localIndex[layout.localRanks[l]] = l;
  env_.timeoutMs = timeoutMs;
  env_.spinCount = static_cast<int>(config::getInt(config::Var::SPIN_COUNT));
  env_.spinNs = spinUs * 1000;
  // More ranks on this machine than the CPUs they may use (local ranks, or simulated nodes sharing the
  // machine; affinities and cgroup quotas counted): a spinning rank steals the CPU a peer needs, so yield
  // almost at once.
  CFX_INFO(kInit, "rank %d: %s", rank_, cpuFit.describe().c_str());
  if (cpuFit.oversubscribed()) {
    env_.spinCount = static_cast<int>(
        std::min<int64_t>(env_.spinCount, config::getInt(config::Var::OVERSUBSCRIBED_SPIN_COUNT)));
    env_.yieldCount = static_cast<int>(config::getInt(config::Var::YIELD_COUNT));
    // Only where ranks take turns on CPUs: under a cgroup quota polling on another CPU spends the quota
    // the late peer needs. Clamped: no health check runs while a rank polls (100000 polls are a few ms).
    if (cpuFit.sharesCpus() && !cpuFit.quotaBound()) {
      env_.remoteSpinCount = static_cast<int>(
          std::clamp<int64_t>(config::getInt(config::Var::OVERSUBSCRIBED_REMOTE_SPIN_COUNT), 0, 100000));
    }
    env_.spinNs = 0;
  }
  env_.checkArgs = config::getBool(config::Var::CHECK_ARGS);
  env_.streamStaging = streamStaging;
  // Oversubscribed, a barrier's handoff times the scheduler (a late rank waits for its CPU), not the
  // distance between cores: auto does not stream there.
  if (cpuFit.oversubscribed() && env_.streamStaging == ExecEnv::StreamStaging::WhenFar) {
    env_.streamStaging = ExecEnv::StreamStaging::Never;
  }
  env_.windowRounds = static_cast<int>(windowRounds);
  env_.aborted = &aborted_;
  env_.net = net_.get();
  if (metricsOn) {
    CommMetrics::Setup m;
    m.commId = bootstrap::jobTag(id);  // the flight recorder's dumps name it alike
    m.comm = name_.empty() ? m.commId : name_;
    m.rank = rank_;
    m.nranks = nranks_;
    m.recorder = recorder_.get();
    if (net_ != nullptr) m.remoteTransport = std::string(net_->name());
    m.network = net_.get();
    metrics_ = std::make_unique<CommMetrics>(std::move(m));
    env_.traffic = &metrics_->traffic();
    metrics::addSource(metrics_.get());
  }
  timed_ = recorder_->enabled() || metrics_ != nullptr;
  linkPeers(env_, selectTransports(hosts, rank_));
  if (config::getBool(config::Var::DIRECT) && numNodes_ == 1 && nranks_ > 1) {
    direct_ = std::make_unique<DirectCalls>(*world_, env_, SingleCopyPolicy::fromConfig(world_->crossMemory()));
    PlanBuilder b("entry barrier");
    b.barrier();
    entryBarrier_ = b.finish();
    entryBarrierGraph_ = buildOpGraph(entryBarrier_, rank_, std::nullopt);
  }
  uint64_t eagerBytes = autoEagerBytes(localSize_);
  if (config::getString(config::Var::EAGER_BYTES) != "auto") {
    const int64_t wanted = config::getInt(config::Var::EAGER_BYTES);
    eagerBytes = std::min<uint64_t>(wanted > 0 ? static_cast<uint64_t>(wanted) : 0, eagerCapacity());
  }
  for (int c = 0; c < kNumCollectives; ++c) {
    if (static_cast<Collective>(c) == Collective::SendRecv) continue;
    const std::optional<uint64_t> limit = selector_.eagerLimit(static_cast<Collective>(c), eagerBytes, eagerCapacity());
    eager_[c] = EagerLimit{limit.has_value() && numNodes_ == 1, limit.value_or(0)};
  }
  planCacheSize_ = static_cast<size_t>(std::max<int64_t>(0, config::getInt(config::Var::PLAN_CACHE)));
  // Every rank on this machine competes for the last-level cache: each counts on its share.
  const int64_t cacheWanted = config::getInt(config::Var::CACHE_BYTES);
  uint64_t cacheBytes = cacheWanted > 0 ? static_cast<uint64_t>(cacheWanted) : lastLevelCacheBytes();
  if (cacheBytes == 0) cacheBytes = uint64_t{8} << 20;
  recent_.setBudget(cacheBytes / static_cast<uint64_t>(std::max({1, localSize_, ranksOnMachine_})));
  shape_ = CommShape{nranks_, numNodes_, numNodes_ == 1};
  shape_.ranksPerNode = nodeLayout_->uniform() ? static_cast<int>(nodeLayout_->nodes.front().size()) : 0;
  for (const auto& node : nodeLayout_->nodes) shape_.maxRanksPerNode = std::max(shape_.maxRanksPerNode, static_cast<int>(node.size()));

  // Every rank passes this barrier and then leaves the store; the process hosting the store waits until
  // all have left, so that its store can go away without stranding a slow rank mid-barrier.
  boot.barrier();
  boot.finish(server != nullptr);
  CFX_INFO(kInit, "rank %d/%d ready%s%s: local rank %d/%d, %d node(s), shm staging %zu bytes, timeout %d ms", rank_,
           nranks_, name_.empty() ? "" : " in comm ", name_.c_str(), localRank_, localSize_, numNodes_,
           static_cast<size_t>(stagingBytes_), timeoutMs);
}

void CommunicatorImpl::openNetwork(const std::vector<int>& localRanks, const CommOptions& options, int timeoutMs,
                                   const transport::BlobAllGather& allGather,
                                   const transport::BlobAllGather& localAllGather) {
  // A split child first asks its parent's network for a view (collective over the child's ranks, alike
  // on every member: all have a parent network or none); when there is none, every rank opens one.
  if (!options.parentRanks.empty() && options.parentNet != nullptr) {
    net_ = options.parentNet->shareWith(options.parentRanks, rank_, allGather);
  }
  if (net_ == nullptr) {
    transport::NetOpenArgs args;
    args.rank = rank_;
    args.nranks = nranks_;
    args.localRank = localRank_;
    args.localRanks = localRanks;
    args.allGather = allGather;
    args.localAllGather = localAllGather;
    args.timeoutMs = timeoutMs;
    net_ = transport::openNetwork(args);
  }
  CFX_INFO(kInit, "rank %d: %d node(s), inter-node messages over %s", rank_, numNodes_, net_->describe().c_str());
}

void CommunicatorImpl::setCostModel(const CommOptions& options, int timeoutMs, const transport::BlobAllGather& allGather) {
  // The same on every rank: rank 0's probe or file, or a split child's parent's.
  CostParams params = options.costs ? *options.costs
                                    : calibrateCostModel(rank_, *nodeLayout_, *net_, chunkBytes_, chooseChunk_,
                                                         env_.windowRounds, timeoutMs, allGather);
  // The plans' radix (this rank's setting, which must be every rank's), or under auto the largest the
  // model may choose.
  params.radix = chooseRadix_ ? kMaxRhdRadix : radix_;
  params.chooseRadix = chooseRadix_;
  selector_.setCostParams(params);
}

bool CommunicatorImpl::recordError(const Status& s, int failedRank) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    first = error_.isOk();
    if (first) error_ = s;
    hasError_.store(true, std::memory_order_release);
  }
  if (first && recorder_ != nullptr) recorder_->noteError(s, failedRank);
  if (first && metrics_ != nullptr) metrics_->setHealth(s.code());
  return first;
}

int CommunicatorImpl::postedFailedRank() const {
  if (world_) {
    if (auto posted = world_->error()) return posted->failedRank;
  }
  return -1;
}

void CommunicatorImpl::dumpFor(const Status& s) {
  const char* reason = s.code() == Code::Timeout ? "timeout" : s.code() == Code::Aborted ? "abort" : "error";
  if (recorder_->dump(reason)) dumped_.store(true, std::memory_order_release);
}

Status CommunicatorImpl::failed(const Status& s) {
  // The first error also goes to the ranks on other nodes where the network can carry it (local ranks
  // have it from the shared error slots): they then fail naming the rank at fault, not this one's
  // closing connection. Only the thread running calls gets here, the one that drives net_.
  recordError(s, postedFailedRank());  // the rank at fault, as the executor posted it (this rank's or a peer's)
  announceOnce();
  return s;
}

void CommunicatorImpl::announceOnce() {
  if (announced_ || net_ == nullptr || !hasError_.load(std::memory_order_acquire)) return;
  announced_ = true;
  // The first error recorded, which may be another thread's abort() rather than this call's status.
  Status first;
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    first = error_;
  }
  net_->announceFailure(Status(first.code(), "rank " + std::to_string(rank_) + " reported: " + first.message()));
}

void CommunicatorImpl::abort() {
  // Any thread may abort: the network is left to the thread running calls. The error is recorded before
  // the flag that stops the call, so that the call's own failure does not come first and the other
  // nodes hear that this rank aborted.
  recordError(Status(Code::Aborted, "rank " + std::to_string(rank_) + " aborted the communicator"), rank_);
  aborted_.store(true, std::memory_order_release);
  if (world_) {
    shm::SharedError e;
    e.code = static_cast<int>(Code::Aborted);
    e.failedRank = rank_;
    e.reporterRank = rank_;
    e.message = "rank " + std::to_string(rank_) + " aborted the communicator";
    world_->postError(e);
    world_->wakeSelf();
  }
  // The aborting thread writes the dump: the call thread may be blocked in a call that now ends.
  if (recorder_ != nullptr) dumpFor(Status(Code::Aborted, "aborted"));
}

Status CommunicatorImpl::asyncError() const {
  if (hasError_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(errorMutex_);
    return error_;
  }
#if CONFLUX_HAVE_CUDA
  if (const DeviceCalls* d = deviceForErrors_.load(std::memory_order_acquire)) {
    if (Status e = d->asyncError(); !e) return e;
  }
#endif
  // A failure elsewhere is visible here even while this rank is between calls.
  if (world_) {
    if (auto e = world_->error()) {
      return Status(static_cast<Code>(e->code), "rank " + std::to_string(e->reporterRank) + " reported: " + e->message);
    }
  }
  return Status::ok();
}

}  // namespace conflux
