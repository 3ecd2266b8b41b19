// The communicator's call runner: one collective or point-to-point batch from the API to the executor.
// Per call: the eager path when the selector allows it, else the direct agreement (src/direct_call.h),
// the selector's plan from the cache (or built), and the executor; device buffers go to DeviceCalls.
#include <algorithm>
#include <string>

#include "core/log.h"
#include "core/ticks.h"
#include "src/communicator.h"
#include "src/device_memory.h"
#include "src/eager.h"
#if CONFLUX_HAVE_CUDA
#include "src/device_call.h"
#endif

namespace conflux {
namespace {

/// The executor's view of a call; `scalar` is the PreMulSum scalar in host memory (null otherwise).
ExecCall execCallOf(const CallArgs& a, const void* scalar) {
  ExecCall call;
  call.coll = a.coll;
  call.dtype = a.dtype;
  call.op = a.op;
  call.root = a.root;
  call.count = a.count;
  call.scalar = a.op == RedOp::PreMulSum ? scalar : nullptr;
  return call;
}

}  // namespace

const CommunicatorImpl::CachedPlan& CommunicatorImpl::planFor(const PlanParams& p, uint64_t bytes, bool peerBuffers) {
  for (auto it = planCache_.begin(); it != planCache_.end(); ++it) {
    if (it->peerBuffers == peerBuffers && it->params == p) {
      planCache_.splice(planCache_.begin(), planCache_, it);
      return planCache_.front();
    }
  }
  CachedPlan entry;
  entry.params = p;
  entry.peerBuffers = peerBuffers;
  CommShape shape = shape_;
  shape.peerBuffers = peerBuffers;
  entry.selection = selector_.select(p.coll, bytes, shape);
  // Every rank chooses alike; one explanation per new plan (conflux-perf --explain), with every
  // candidate's time predicted from its plan's rounds.
  if (rank_ == 0 && log::enabled(log::Level::Info, log::kTuning)) {
    CFX_INFO(kTuning, "%s of %llu bytes on %d ranks: %s, because %s; %s", std::string(collectiveName(p.coll)).c_str(),
             static_cast<unsigned long long>(bytes), nranks_, std::string(algoName(entry.selection.algo)).c_str(),
             entry.selection.reason.c_str(), selector_.predictedTimes(p, shape, 0).c_str());
  }
  PlanParams built = p;  // the cache key stays the call's parameters: the choice follows from them
  if (entry.selection.chunkBytes != 0) built.chunkBytes = entry.selection.chunkBytes;
  if (entry.selection.radix != 0) built.radix = entry.selection.radix;
  entry.plan = std::make_shared<const Plan>(buildPlan(entry.selection.algo, built));  // may throw
  entry.traceAlgorithm = recorder_->internAlgorithm(entry.plan->algorithm);
  if (numNodes_ > 1) {
    // Barriers and staging exist only in shared memory: the selector never picks such a plan across nodes.
    for (const Op& op : entry.plan->ops) {
      if (op.kind == OpKind::Barrier || entry.plan->stagingBytes > 0) {
        throw Error(Code::InternalError, "plan " + entry.plan->algorithm +
                                             " uses barriers or staging, which do not cross nodes");
      }
    }
  }
  if (planCacheSize_ == 0) {
    uncached_ = std::move(entry);
    return uncached_;
  }
  planCache_.push_front(std::move(entry));
  if (planCache_.size() > planCacheSize_) planCache_.pop_back();
  return planCache_.front();
}

const OpGraph* CommunicatorImpl::graphFor(const CachedPlan& c, const ExecBuffers& bufs) const {
  if (c.apart == nullptr) c.apart = std::make_shared<const OpGraph>(buildOpGraph(*c.plan, rank_, std::nullopt));
  const std::optional<int64_t> at = sendInRecvOf(*c.apart, bufs.send, bufs.recv);
  if (!at) return c.apart.get();
  if (c.aliased == nullptr || c.aliased->sendInRecv != at) {
    c.aliased = std::make_shared<const OpGraph>(buildOpGraph(*c.plan, rank_, at));
  }
  return c.aliased.get();
}

CommunicatorImpl::Entry CommunicatorImpl::enter() {
  // One counter reading when the lock is free at once (the usual case): queued and started coincide.
  Entry e;
  e.queuedTicks = timed_ ? ticksNow() : 0;
  e.lock = std::unique_lock<std::mutex>(mutex_, std::try_to_lock);
  e.startTicks = e.queuedTicks;
  if (!e.lock.owns_lock()) {
    e.lock.lock();
    e.startTicks = timed_ ? ticksNow() : 0;
  }
  return e;
}

template <class Body>
Status CommunicatorImpl::traced(const Entry& entry, TraceCursor cursor, Collective coll, uint64_t bytes,
                                const Body& body) {
  // A call that threw past here (an allocation failure) left its entry started: it failed.
  if (cursor.active() && current_.active()) FlightRecorder::end(current_, false, ticksNow());
  current_ = cursor;
  algorithm_ = 0;
  if (metrics_) metrics_->began(coll != Collective::SendRecv);
  Status s;
  try {
    s = body();  // one named result, returned as is: no copies of the Status on the fast path
  } catch (...) {
    // An allocation failure, say: the call failed; it must not stay in flight in the metrics.
    if (metrics_) metrics_->failedCall(Code::InternalError, timed_ ? ticksNow() : 0);
    throw;
  }
  const uint64_t endTicks = timed_ ? ticksNow() : 0;
  FlightRecorder::end(current_, s.isOk(), endTicks);
  current_ = TraceCursor();
  if (metrics_) {
    if (s) metrics_->completed(coll, bytes, endTicks - entry.startTicks, algorithm_, endTicks);
    else metrics_->failedCall(s.code(), endTicks);
  }
  if (!s && hasError_.load(std::memory_order_acquire)) dumpFor(s);
  return s;
}

Status CommunicatorImpl::run(const CallArgs& a) {
  const Entry entry = enter();
  if (Status e = asyncError(); !e) {
    // Recorded as a failed call all the same: its arguments let an analysis of the dumps tell whose
    // differ when this rank was refused because a peer had found a mismatch (tools/trace).
    if (a.count != 0) {
      FlightRecorder::end(recorder_->begin(a.coll, a.dtype, a.op, a.root, a.count, entry.queuedTicks, entry.startTicks),
                          false, timed_ ? ticksNow() : 0);
    }
    return refuse(e);
  }
  if (a.count == 0) return Status::ok();
  return traced(entry, recorder_->begin(a.coll, a.dtype, a.op, a.root, a.count, entry.queuedTicks, entry.startTicks),
                a.coll, metrics_ ? callBytes(a.coll, a.count, dataTypeSize(a.dtype), nranks_) : 0,
                [&] { return runTraced(a); });
}

Status CommunicatorImpl::runTraced(const CallArgs& a) {
#if CONFLUX_HAVE_CUDA
  if (const DeviceCalls::Places places = DeviceCalls::placesOf(a); places.onDevice()) {
    chose(deviceAlgorithm_);  // the staged path names its host plan instead
    Status s = device().run(a, places);
    if (!s && s.code() != Code::InvalidUsage) return failed(s);
    return s;
  }
#endif
  return runLocked(a);
}

Status CommunicatorImpl::refuse(const Status& e) {
  if (metrics_) {
    metrics_->countError(e.code());
    metrics_->setHealth(e.code());
  }
  if (!dumped_.load(std::memory_order_acquire)) {
    recorder_->noteError(e, postedFailedRank());
    dumpFor(e);
  }
  return Status(e.code(), "communicator is out of service: " + e.message());
}

#if CONFLUX_HAVE_CUDA
DeviceCalls& CommunicatorImpl::device() {
  if (!device_) {
    DeviceCalls::Setup setup;
    setup.rank = rank_;
    setup.nranks = nranks_;
    setup.oneNode = numNodes_ == 1;
    setup.timeoutMs = env_.timeoutMs;
    setup.selector = &selector_;
    device_ = std::make_shared<DeviceCalls>(
        setup, [this](const CallArgs& h) { return runLocked(h); },
        [this](const std::vector<P2pOp>& ops) { return runP2pLocked(ops); });
    deviceForErrors_.store(device_.get(), std::memory_order_release);
  }
  return *device_;
}
#endif

PlanParams CommunicatorImpl::planParamsOf(const CallArgs& a) const {
  PlanParams p;
  p.coll = a.coll;
  p.nranks = nranks_;
  p.rank = rank_;
  p.count = a.count;
  p.eltSize = static_cast<uint32_t>(dataTypeSize(a.dtype));
  p.root = a.root;
  p.stagingBytes = stagingBytes_;
  p.chunkBytes = chunkBytes_;
  p.radix = radix_;
  if (numNodes_ > 1) p.layout = nodeLayout_;
  return p;
}

Status CommunicatorImpl::runLocked(const CallArgs& a) {
  const auto elt = static_cast<uint32_t>(dataTypeSize(a.dtype));
  uint64_t scalar = a.scalarBits;  // PreMulSum: the executor reads the scalar from here
  if (a.op == RedOp::PreMulSum && a.scalarPtr != nullptr && !readSmallValue(&scalar, a.scalarPtr, elt)) {
    return Status(Code::CudaError, "op: cannot read the PreMulSum scalar from device memory");
  }
  if (const EagerLimit& eager = eager_[static_cast<int>(a.coll)]; eager.on) {
    if (const uint64_t input = eagerInputBytes(a.coll, a.count, elt, nranks_); input <= eager.maxBytes) {
      return runEagerCall(a, &scalar, input);
    }
  }

  const PlanParams p = planParamsOf(a);
  const BufferSizes sizes = bufferSizes(p);
  ExecBuffers bufs;
  bool peerBuffers = false, singleCopy = false;
  if (Status s = agreeOnDirect(a, sizes, bufs, peerBuffers, singleCopy); !s) return s;
  const CachedPlan* cached = nullptr;
  try {
    cached = &planFor(p, std::max(sizes.send, sizes.recv), peerBuffers);
  } catch (const Error& e) {
    if (peerBuffers) return failed(reportFailure(env_, e.status(), -1));  // peers are in the call already
    return e.status();  // nothing was communicated: the communicator stays usable
  }
  const Plan* plan = cached->plan.get();
  chose(singleCopy ? singleCopyAlgorithm_ : cached->traceAlgorithm);
  CFX_INFO(kColl, "%s count=%llu %s %s root=%d: %s (%s)", std::string(collectiveName(a.coll)).c_str(),
           static_cast<unsigned long long>(a.count), std::string(dataTypeName(a.dtype)).c_str(),
           std::string(redOpName(a.op)).c_str(), a.root, singleCopy ? "direct_cma" : plan->algorithm.c_str(),
           singleCopy ? "private send buffers read with process_vm_readv" : cached->selection.reason.c_str());

  if (scratch_.size() < plan->scratchBytes) {
    if (env_.net != nullptr) env_.net->forget(scratch_.data(), scratch_.size());  // stale registrations
    scratch_ = std::vector<std::byte>(plan->scratchBytes);
  }
  bufs.send = static_cast<const std::byte*>(a.send);
  bufs.recv = static_cast<std::byte*>(a.recv);
  bufs.scratch = scratch_.data();
  ExecCall call = execCallOf(a, &scalar);
  call.trace = current_;
  call.recvCold = recent_.recordCall(a.send, sizes.send, a.recv, sizes.recv);
  call.graph = graphFor(*cached, bufs);
  return execute(*plan, bufs, call);
}

Status CommunicatorImpl::agreeOnDirect(const CallArgs& a, const BufferSizes& sizes, ExecBuffers& bufs, bool& direct,
                                       bool& singleCopy) {
  direct = false;
  singleCopy = false;
  // PreMulSum scales each input where its owner reads it; direct plans read peers' inputs.
  if (!direct_ || a.op == RedOp::PreMulSum) return Status::ok();
  if (auto forced = selector_.forced(a.coll); forced && *forced != Algo::Direct) return Status::ok();
  DirectCalls::Call c;
  c.coll = a.coll;
  c.root = a.root;
  c.send = a.send;
  c.sendBytes = sizes.send;
  c.recv = a.recv;
  c.recvBytes = sizes.recv;
  c.pieceBytes = a.count * dataTypeSize(a.dtype);  // a copying collective's piece: a block, or the vector
  // Before this call is recorded (runLocked): whether its buffers were touched recently enough to be in cache.
  c.warm = recent_.warm(a.send, sizes.send) && recent_.warm(a.recv, sizes.recv);
  if (c.warm && c.pieceBytes < DirectCalls::kLargePieceBytes) {  // small pieces need hot buffers
    const uint64_t hot = recent_.budget() / DirectCalls::kHotShare;
    c.hot = recent_.warmWithin(a.send, sizes.send, hot) && recent_.warmWithin(a.recv, sizes.recv, hot);
  }
  if (!direct_->publish(c)) {
    world_->barrierArrive();  // counted like everyone's; the answer (staged) needs no waiting
    return Status::ok();
  }
  ExecCall call = execCallOf(a, nullptr);
  call.seq = seq_ + 1;  // the call this barrier opens
  call.trace = current_;
  call.graph = &entryBarrierGraph_;
  if (Status s = conflux::execute(entryBarrier_, ExecBuffers{}, call, env_, work_); !s) return failed(s);
  try {
    const DirectCalls::Mode mode = direct_->resolve(a.coll, a.root, bufs);
    direct = mode != DirectCalls::Mode::Staged;
    singleCopy = mode == DirectCalls::Mode::SingleCopy;
  } catch (const Error& e) {
    return failed(reportFailure(env_, e.status(), -1));
  }
  return Status::ok();
}

Status CommunicatorImpl::runEagerCall(const CallArgs& a, const void* scalar, uint64_t inputBytes) {
  const uint64_t limit = eager_[static_cast<int>(a.coll)].maxBytes;
  CFX_INFO(kColl, "%s count=%llu %s %s root=%d: eager (input fits an eager slot of %llu bytes)",
           std::string(collectiveName(a.coll)).c_str(), static_cast<unsigned long long>(a.count),
           std::string(dataTypeName(a.dtype)).c_str(), std::string(redOpName(a.op)).c_str(), a.root,
           static_cast<unsigned long long>(limit));
  // One explanation per new size, like planFor's (conflux-perf --explain); a bounded memo.
  if (rank_ == 0 && log::enabled(log::Level::Info, log::kTuning) && explainedEager_.size() < 4096 &&
      explainedEager_.emplace(a.coll, inputBytes).second) {
    const Selection why = selector_.explainEager(a.coll, inputBytes, limit, shape_);
    CFX_INFO(kTuning, "%s of %llu bytes per rank on %d ranks: eager, because %s; %s",
             std::string(collectiveName(a.coll)).c_str(), static_cast<unsigned long long>(inputBytes), nranks_,
             why.reason.c_str(), selector_.predictedTimes(planParamsOf(a), shape_, std::max<uint64_t>(inputBytes, 1)).c_str());
  }
  EagerCall c;
  c.coll = a.coll;
  c.dtype = a.dtype;
  c.op = a.op;
  c.root = a.root;
  c.count = a.count;
  c.send = a.send;
  c.recv = a.recv;
  c.scalar = a.op == RedOp::PreMulSum ? scalar : nullptr;
  c.eagerSeq = ++eagerSeq_;
  c.callSeq = ++seq_;
  c.trace = current_;
  chose(eagerAlgorithm_);
  Status s = runEager(c, *world_, env_, work_);
  if (!s) return failed(s);
  return s;
}

Status CommunicatorImpl::runP2p(const std::vector<P2pOp>& ops) {
  const Entry entry = enter();
  if (Status e = asyncError(); !e) return refuse(e);
  uint64_t sent = 0, received = 0;
  for (const P2pOp& op : ops) (op.isSend ? sent : received) += op.bytes;
  const TraceCursor cursor =
      recorder_->beginP2p(static_cast<uint32_t>(ops.size()), sent, entry.queuedTicks, entry.startTicks);
  return traced(entry, cursor, Collective::SendRecv, std::max(sent, received), [&] {
    chose(p2pAlgorithm_);
    return runP2pTraced(ops);
  });
}

Status CommunicatorImpl::runP2pTraced(const std::vector<P2pOp>& ops) {
#if CONFLUX_HAVE_CUDA
  if (DeviceCalls::touchesDevice(ops)) {
    Status s = device().runP2p(ops);
    if (!s && s.code() != Code::InvalidUsage) return failed(s);
    return s;
  }
#endif
  return runP2pLocked(ops);
}

Status CommunicatorImpl::runP2pLocked(const std::vector<P2pOp>& ops) {

  // One round: every send and receive progresses concurrently, so batched exchanges cannot deadlock.
  // Sends to self are matched in order with receives from self and become local copies.
  PlanBuilder b("p2p");
  std::vector<const P2pOp*> selfSends, selfRecvs;
  for (const P2pOp& op : ops) {
    if (op.bytes == 0) continue;
    if (op.peer == rank_) {
      (op.isSend ? selfSends : selfRecvs).push_back(&op);
      continue;
    }
    auto addr = reinterpret_cast<uintptr_t>(op.buf);
    if (op.isSend) b.send(op.peer, BufRef::send(addr), op.bytes);
    else b.recv(op.peer, BufRef::recv(addr), op.bytes);
  }
  if (selfSends.size() != selfRecvs.size()) {
    return Status(Code::InvalidUsage, "a group sends " + std::to_string(selfSends.size()) +
                                          " message(s) to this rank itself but receives " +
                                          std::to_string(selfRecvs.size()));
  }
  for (size_t i = 0; i < selfSends.size(); ++i) {
    if (selfSends[i]->bytes != selfRecvs[i]->bytes) {
      return Status(Code::InvalidUsage, "send to self of " + std::to_string(selfSends[i]->bytes) +
                                            " bytes is matched by a receive of " +
                                            std::to_string(selfRecvs[i]->bytes) + " bytes");
    }
    b.copy(BufRef::recv(reinterpret_cast<uintptr_t>(selfRecvs[i]->buf)),
           BufRef::send(reinterpret_cast<uintptr_t>(selfSends[i]->buf)), selfSends[i]->bytes);
  }
  Plan plan = b.finish();
  if (plan.rounds.empty()) return Status::ok();
  for (const P2pOp& op : ops) recent_.touch(op.buf, op.bytes);  // what later calls find in cache
  CFX_INFO(kP2p, "point-to-point batch of %zu operation(s)", ops.size());
  ExecCall call;
  call.coll = Collective::SendRecv;
  call.dtype = DataType::Uint8;
  call.trace = current_;
  return execute(plan, ExecBuffers{}, call);
}

Status CommunicatorImpl::execute(const Plan& plan, const ExecBuffers& bufs, ExecCall call) {
  // Collectives are numbered alike on every rank. A point-to-point batch is made by some ranks only, so
  // it takes no number (ExecCall::seq); counting it would put the others one call behind.
  if (call.coll == Collective::SendRecv) {
    call.seq = 0;
    call.p2pBatch = ++p2pBatches_;
  } else {
    call.seq = ++seq_;
  }
  if (plan.stagingBytes > 0) call.stagingEpoch = stagingEpoch_++;
  Status s = conflux::execute(plan, bufs, call, env_, work_);
  if (!s) return failed(s);
  return s;
}

}  // namespace conflux
