// The communicator: who the ranks are, the transports between them, and the call path that turns one
// collective call into a plan, runs it and records errors.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/executor.h"
#include "algorithms/plan.h"
#include "algorithms/selector.h"
#include "core/error.h"
#include "core/types.h"
#include "src/comm_metrics.h"
#include "src/direct_call.h"
#include "src/flight_recorder.h"
#include "src/recent_buffers.h"
#include "src/recovery_point.h"
#include "transport/shm/shm_world.h"

namespace conflux {

namespace transport {
class Network;
}
class DeviceCalls;

namespace bootstrap {
struct UniqueId;
class Bootstrap;
class StoreServer;
}  // namespace bootstrap

/// One collective (or point-to-point batch) call, as the API received it.
struct CallArgs {
  Collective coll = Collective::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  uint64_t count = 0;
  DataType dtype = DataType::Float32;
  RedOp op = RedOp::Sum;
  int root = 0;
  void* stream = nullptr;  ///< cudaStream_t for device buffers
  /// PreMulSum (op == RedOp::PreMulSum): this rank's scalar, one value of dtype, in the low bytes of
  /// scalarBits, or at scalarPtr when that is set (read when the call runs: host memory for host buffers,
  /// device memory for device buffers).
  uint64_t scalarBits = 0;
  const void* scalarPtr = nullptr;
};

/// Per-communicator settings (cfxConfig_t resolved against the environment).
struct CommOptions {
  int timeoutMs = -1;  ///< -1: CONFLUX_TIMEOUT_MS
  /// How long joining waits for the other ranks at the rendezvous (-1: timeoutMs). A shrink waits longer:
  /// survivors learn of a failure at different times (up to a timeout apart).
  int joinTimeoutMs = -1;
  std::string name;    ///< shown in log lines and error messages; empty: none
  /// A split child's inherited cost model (skips calibration); empty: calibrate as usual.
  std::optional<CostParams> costs;
  /// A split child: the parent's rank of each of its ranks (empty for a communicator that is no child).
  std::vector<int> parentRanks;
  /// A split child that may send through its parent's network when it spans nodes (it does when the
  /// network can share, transport::Network::shareWith); null: it opens a network of its own. Every
  /// member of a child has parentRanks set, and passes parentNet or not, alike.
  std::shared_ptr<transport::Network> parentNet;
};

/// One send or receive of a point-to-point batch.
struct P2pOp {
  bool isSend = true;
  const void* buf = nullptr;  // recv buffers are cast back
  uint64_t bytes = 0;
  int peer = 0;
  void* stream = nullptr;  ///< cudaStream_t for device buffers
};

class CommunicatorImpl {
 public:
  /// Joins the communicator described by `id` (collective over all ranks). `server` keeps the rendezvous
  /// store alive when this process hosts it. Throws Error.
  static std::unique_ptr<CommunicatorImpl> create(const bootstrap::UniqueId& id, int nranks, int rank,
                                                  std::shared_ptr<bootstrap::StoreServer> server,
                                                  const CommOptions& options = {});
  ~CommunicatorImpl();

  /// cfxCommSplit on this rank: exchanges (color, key) and the new communicators' ids over this one, then
  /// joins its color's communicator (collective over that color); null for CFX_SPLIT_NOCOLOR (< 0). With
  /// `share`, a child that spans nodes takes this communicator's cost model and, where the network can
  /// (transport::Network::shareWith: libfabric's endpoints in a tag space free on all its members), a
  /// view of its network; otherwise, and without `share`, it opens its own and measures afresh. Throws Error.
  std::unique_ptr<CommunicatorImpl> split(int color, int key, CommOptions options, bool share);
  /// cfxCommCreateGroup on this rank, a member: the first member sends the new communicator's id to the
  /// others over this one (point to point), then all join it (collective over `members`, distinct ranks of
  /// this communicator, this one among them, in the new rank order). `share` as in split. Throws Error.
  std::unique_ptr<CommunicatorImpl> createGroup(const std::vector<int>& members, CommOptions options, bool share);

  /// cfxCommShrink on this rank, a survivor: every rank of this communicator that is not in `excluded`
  /// (ascending, distinct, this rank not among them) calls it with the same list; they meet at the
  /// recovery point of the lowest of them (src/recovery_point.h), not over this communicator, so this
  /// works when this communicator has failed. The new communicator ranks the survivors in their order
  /// here; `share` as in split. This communicator is left as it is. Throws Error.
  std::unique_ptr<CommunicatorImpl> shrink(const std::vector<int>& excluded, CommOptions options, bool share);

  /// The configured name ("" when none).
  const std::string& name() const { return name_; }
  /// The timeout calls wait for a stuck peer (ms).
  int timeoutMs() const { return env_.timeoutMs; }
  /// Ranks span more than one node.
  bool spansNodes() const { return numNodes_ > 1; }

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  int localRank() const { return localRank_; }
  int localSize() const { return localSize_; }

  /// Runs one collective; `args` must already be validated.
  Status run(const CallArgs& args);
  /// Runs a batch of sends and receives concurrently (a group's point-to-point part).
  Status runP2p(const std::vector<P2pOp>& ops);

  /// Marks the communicator aborted: blocked calls return, peers see an error.
  void abort();
  /// Ok while healthy, otherwise the error that put the communicator out of service.
  Status asyncError() const;

 private:
  CommunicatorImpl() = default;
  void init(const bootstrap::UniqueId& id, int nranks, int rank,
            std::shared_ptr<bootstrap::StoreServer> server, const CommOptions& options);
  /// What split and createGroup share once the members know the new id: joins it as a child of this one.
  std::unique_ptr<CommunicatorImpl> joinChild(const std::vector<int>& members, const bootstrap::UniqueId& id,
                                              std::shared_ptr<bootstrap::StoreServer> server, CommOptions options,
                                              bool share);
  /// Reaches the ranks on other nodes: opens the network CONFLUX_NET names (transport/network.h), or
  /// shares the parent's (a split child). Collective over every rank.
  void openNetwork(const std::vector<int>& localRanks, const CommOptions& options, int timeoutMs,
                   const transport::BlobAllGather& allGather, const transport::BlobAllGather& localAllGather);
  /// The cost model over net_ (collective over every rank).
  void setCostModel(const CommOptions& options, int timeoutMs, const transport::BlobAllGather& allGather);
  struct CachedPlan {
    PlanParams params;
    bool peerBuffers = false;
    Selection selection;
    std::shared_ptr<const Plan> plan;
    uint32_t traceAlgorithm = 0;  ///< the plan's algorithm in the flight recorder's names
    /// The plan's dataflow graphs (algorithms/op_graph.h), built at first use: for buffers apart, and
    /// for the last in-place aliasing seen.
    mutable std::shared_ptr<const OpGraph> apart, aliased;
  };
  /// The graph of `c`'s plan for these buffers.
  const OpGraph* graphFor(const CachedPlan& c, const ExecBuffers& bufs) const;
  /// The selector's choice and its plan for `p`, from the cache or made now (the choice depends only on
  /// the parameters, so it is cached with the plan and the fast path builds no strings).
  const CachedPlan& planFor(const PlanParams& p, uint64_t bytes, bool peerBuffers);
  /// Steps 1-3 of src/direct_call.h: whether this call runs direct (then `bufs` has the peer tables), and
  /// whether it reads some peer's private buffer with single copies.
  Status agreeOnDirect(const CallArgs& a, const BufferSizes& sizes, ExecBuffers& bufs, bool& direct, bool& singleCopy);
  Status execute(const Plan& plan, const ExecBuffers& bufs, ExecCall call);
  Status runEagerCall(const CallArgs& a, const void* scalar, uint64_t inputBytes);
  /// What the plans need to know of call `a` on this communicator.
  PlanParams planParamsOf(const CallArgs& a) const;
  Status runLocked(const CallArgs& a);
  Status runP2pLocked(const std::vector<P2pOp>& ops);
  /// The device-buffer path, made at the first call that touches CUDA memory (null until then).
  DeviceCalls& device();
  /// Records the first error of the communicator (sticky) and announces it to the other nodes; returns s.
  /// Call-path only (it drives the network).
  Status failed(const Status& s);
  /// Records `s` if it is the first error; true when it was. The flight recorder notes it too, naming
  /// `failedRank` (-1: none) as the rank at fault.
  bool recordError(const Status& s, int failedRank);
  /// The rank the error posted in this node's shared error slot names (-1: none posted, or it names none).
  int postedFailedRank() const;
  /// This rank's lock on the communicator, and when the call began waiting for it (flight recorder).
  struct Entry {
    std::unique_lock<std::mutex> lock;
    uint64_t queuedTicks = 0;
    uint64_t startTicks = 0;
  };
  /// Runs `body` as the call the flight recorder's `cursor` records (`coll` of `bytes`, callBytes): ends
  /// the entry with its result, counts it in the metrics, and a failed call of a communicator in error
  /// writes the recorder's dump.
  template <class Body>
  Status traced(const Entry& entry, TraceCursor cursor, Collective coll, uint64_t bytes, const Body& body);
  /// The call in progress runs with algorithm `index` (recorder names): the recorder's entry and the
  /// metrics say so.
  void chose(uint32_t index) {
    algorithm_ = index;
    FlightRecorder::setAlgorithm(current_, index);
  }
  Status runTraced(const CallArgs& a);
  Status runP2pTraced(const std::vector<P2pOp>& ops);
  /// What run() and runP2p() answer once the communicator is out of service (error `e`): the first such
  /// answer writes the dump when none was written yet (this rank was idle when a peer failed).
  Status refuse(const Status& e);
  /// Writes the flight recorder's dump for error `s` (reason timeout, abort or error).
  void dumpFor(const Status& s);
  Entry enter();
  /// Sends the first recorded error to the other nodes, once per communicator. Call-path only.
  void announceOnce();

  std::string name_;
  int rank_ = 0;
  int nranks_ = 1;
  int localRank_ = 0;
  int localSize_ = 1;
  int numNodes_ = 1;
  std::unique_ptr<shm::ShmWorld> world_;
  std::unique_ptr<DirectCalls> direct_;  // null when direct algorithms are off (CONFLUX_DIRECT=0)
  Plan entryBarrier_;                    // the one-Barrier plan of direct_call.h step 2
  OpGraph entryBarrierGraph_;            // its dataflow graph (built once: the call runs often)
  ExecEnv env_;
  Selector selector_;
  CommShape shape_;
  std::shared_ptr<const NodeLayout> nodeLayout_;  ///< ranks of each node
  RecoveryPoint recovery_;                        ///< this rank's, for cfxCommShrink
  std::vector<sockaddr_storage> recoveryPoints_;  ///< every rank's recovery point address
  std::mutex shrinkMutex_;  ///< one shrink at a time (not the call mutex: a call may be blocked on a dead rank)
  std::map<std::vector<int>, uint32_t> shrinks_;  ///< shrinks made so far, per excluded list
  int ranksOnMachine_ = 0;  ///< ranks (this one included) running on this machine's kernel, any node

  std::mutex mutex_;                 // one call at a time
  std::atomic<bool> aborted_{false};
  bool announced_ = false;  // announceOnce() ran (call thread only)
  mutable std::mutex errorMutex_;
  Status error_;                     // sticky
  std::atomic<bool> hasError_{false};  // error_ is set: lets healthy calls skip errorMutex_

  uint64_t seq_ = 0;                 // collectives so far (every rank makes each)
  uint64_t p2pBatches_ = 0;          // point-to-point batches so far (this rank's own count)
  uint64_t eagerSeq_ = 0;            // eager calls so far (src/eager.h)
  /// Per collective: whether it may run eagerly, and the largest input (eagerInputBytes) that does
  /// (CONFLUX_EAGER_BYTES, or a whole slot when CONFLUX_ALGO forces eager; off when it forces another).
  struct EagerLimit {
    bool on = false;
    uint64_t maxBytes = 0;
  };
  std::array<EagerLimit, kNumCollectives> eager_{};
  std::set<std::pair<Collective, uint64_t>> explainedEager_;  // rank 0 with TUNING logs: sizes explained
  uint64_t stagingEpoch_ = 0;
  uint64_t stagingBytes_ = 0;
  uint64_t chunkBytes_ = kPipelineChunkBytes;
  bool chooseChunk_ = false;  // CONFLUX_CHUNK_BYTES=auto: the cost model picks hierarchical chunks
  int radix_ = 2;             // CONFLUX_RHD_RADIX: recursive halving-doubling's largest radix (2 under auto)
  bool chooseRadix_ = false;  // CONFLUX_RHD_RADIX=auto: the cost model picks rhd's radix per call
  std::vector<std::byte> scratch_;
  ExecWorkspace work_;
  RecentBuffers recent_;  // host buffers of recent calls: is a receive buffer still in cache?
  std::unique_ptr<FlightRecorder> recorder_;  // the last CONFLUX_TRACE_ENTRIES calls (src/flight_recorder.h)
  TraceCursor current_;                       // the call in progress (call thread only)
  uint32_t eagerAlgorithm_ = 0, p2pAlgorithm_ = 0, deviceAlgorithm_ = 0, singleCopyAlgorithm_ = 0;  // recorder names
  std::atomic<bool> dumped_{false};           // a dump was written for the communicator's error
  uint32_t algorithm_ = 0;                    // the call in progress's algorithm (call thread only)
  // Counters of the calls, exported by core/metrics (null unless CONFLUX_METRICS_ADDR/FILE ask for them).
  std::unique_ptr<CommMetrics> metrics_;
  bool timed_ = false;  // calls read the tick counter (the recorder or the metrics are on)

  std::list<CachedPlan> planCache_;  // most recently used first
  CachedPlan uncached_;              // the last plan when the cache is disabled
  size_t planCacheSize_ = 16;
  // Peers on other nodes (null on one node). Declared last so that it is destroyed first: unfinished
  // operations of a failed call may still point into scratch_ and work_ until the endpoints close.
  // Split children may share it (transport::Network::shareWith).
  std::shared_ptr<transport::Network> net_;
  // Made lazily (a host-only program never touches CUDA); a shared_ptr because its deleter is bound
  // where it is made: builds without CUDA never define DeviceCalls' destructor.
  // Destroyed before net_ (declared after it): staged copies may still read the host staging buffer.
  std::shared_ptr<DeviceCalls> device_;
  std::atomic<const DeviceCalls*> deviceForErrors_{nullptr};
};

}  // namespace conflux
