// Internals of the plan simulator (simulator.h), shared by its implementation files.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "algorithms/simulator.h"

namespace conflux::simdetail {

/// Thrown inside the simulator for the first problem found; becomes SimResult::error.
struct SimFailure {
  std::string message;
};

/// Element arithmetic on unsigned integers of eltSize bytes.
struct ElementOps {
  uint32_t elt = 4;
  RedOp op = RedOp::Sum;
  int nranks = 1;
  /// acc = op(acc, x) elementwise over `bytes` bytes.
  void combine(uint8_t* acc, const uint8_t* x, uint64_t bytes) const;
  /// buf /= nranks elementwise when op is Avg.
  void finalize(uint8_t* buf, uint64_t bytes) const;
  /// Element i of buf as an integer.
  uint64_t load(const uint8_t* buf, uint64_t i) const;
  /// PreMulSum: buf *= rank r's scalar elementwise (wrapping); nothing for other ops.
  void scale(uint8_t* buf, uint64_t bytes, int r) const;
  /// Rank r's PreMulSum scalar: odd, so that a value scaled twice differs from one scaled once.
  static uint64_t scalarOf(int r) { return 3 + 2 * static_cast<uint64_t>(r); }
};

/// Expected recv contents of every rank (an empty vector: recv must stay untouched), given every
/// rank's send contents (bufferSizes(p).send bytes each).
std::vector<std::vector<uint8_t>> referenceOutputs(const PlanParams& p, const ElementOps& ops,
                                                   const std::vector<const uint8_t*>& sends);

/// A reference resolved to real memory.
struct Phys {
  int region = -1;
  uint64_t off = 0;
  bool operator==(const Phys& o) const { return region == o.region && off == o.off; }
};

struct Pending {
  int rank = 0;
  int call = 0;
  uint32_t round = 0;
  uint32_t op = 0;
};

/// Posted, unmatched messages of one direction (FIFO queues; cheap to create, most stay tiny).
struct Channel {
  std::vector<Pending> sends, recvs;
  size_t sendHead = 0, recvHead = 0;
  bool ready() const { return sendHead < sends.size() && recvHead < recvs.size(); }
  static Pending pop(std::vector<Pending>& q, size_t& head) {
    const Pending p = q[head++];
    if (head == q.size()) {
      q.clear();
      head = 0;
    }
    return p;
  }
};

/// Last staging accesses of one element slot (epochs count completed barriers).
struct StagingMark {
  int32_t wEpoch = -1, wRank = -1, rEpoch = -1, rRank = -1;
};
inline constexpr int32_t kManyReaders = -2;

struct RankState {
  int call = 0;
  uint32_t round = 0;
  bool posted = false;
  bool done = false;
  std::vector<uint32_t> waiting;  // comm ops of the posted round not yet complete
  int64_t barriersPosted = 0;
  int32_t epoch = 0;              // barriers completed
  int64_t callBarrierBase = 0;    // barriersPosted when the current call started
};

struct BarrierState {
  int arrived = 0;
  std::vector<Pending> waiters;
};

/// One simulation run.
class Simulator {
 public:
  Simulator(const SimConfig& cfg, const PlanFactory& makePlan);
  SimResult run();

 private:
  // setup (simulator.cc)
  void buildPlans(const PlanFactory& makePlan);
  void allocate();
  // static checks (simulator_checks.cc)
  void validate(int r);
  void checkRef(int r, uint32_t round, uint32_t opIdx, const BufRef& ref, uint64_t bytes, bool write);
  void checkRoundConflicts(int r, uint32_t round);
  // execution (simulator.cc)
  bool step(int r);
  void advanceCalls(int r);
  void post(int r);
  void match(int from, int to);
  void arrive(int r, uint32_t opIdx);
  void runLocal(int r);
  void finishWait(int r, uint32_t opIdx);
  [[noreturn]] void deadlock();
  // memory
  Phys phys(int r, int call, const BufRef& ref) const;
  uint8_t* ptr(const Phys& p) { return regions_[p.region].data() + p.off; }
  /// Records an access to memory other ranks may touch (staging; user buffers when plans name peers'
  /// buffers) and fails on a race: another rank touched the same bytes in the same barrier epoch and one
  /// of the two accesses writes. Also fails on a peer-buffer access before the call's first Barrier.
  void touchShared(int r, int call, const BufRef& ref, uint64_t bytes, bool write, uint32_t opIdx);
  /// A read of rank r's own Send buffer: where PreMulSum scales the input (executor.h, ExecCall::scalar).
  static bool ownInput(int r, const BufRef& ref) { return ref.kind == BufKind::Send && (ref.rank < 0 || ref.rank == r); }
  // results (simulator_checks.cc)
  void checkData();

 public:
  /// "rank r, call c, round k, op i (Kind)"; call < 0 (static checks) is left out.
  std::string where(int r, int call, uint32_t round, uint32_t opIdx) const;
  std::string refName(int r, const BufRef& ref, uint64_t bytes) const;

 private:
  SimConfig cfg_;
  PlanParams p_;
  int n_ = 1;
  uint32_t elt_ = 4;
  BufferSizes sizes_;
  ElementOps ops_;
  std::vector<Plan> plans_;
  std::vector<int> stagingArea_;             // per call: area index, -1 when the call uses no staging
  std::vector<std::vector<uint8_t>> regions_;
  std::vector<std::vector<uint8_t>> initial_;  // initial contents of the user regions
  std::vector<int> userRegion_;               // [call * n + r] * 2 + {0: send, 1: recv}
  std::vector<int> scratchRegion_, stagingRegion_;
  uint64_t stagingStride_ = 0;                // bytes per simulated staging area
  std::vector<uint64_t> sendBase_, recvBase_;
  std::vector<std::vector<StagingMark>> marks_;  // per staging owner, per element slot
  bool peerPlans_ = false;                      // some plan names a peer's send or recv buffer
  std::unordered_map<int, std::vector<StagingMark>> userMarks_;  // per user region (peerPlans_ only)
  std::vector<RankState> ranks_;
  std::unordered_map<uint64_t, Channel> channels_;
  std::unordered_map<int64_t, BarrierState> barriers_;
  int doneCount_ = 0;
  SimResult result_;
};

}  // namespace conflux::simdetail
