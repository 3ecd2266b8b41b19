// Plan building and the fixed cost of running a plan: what a collective call costs before any byte moves.
//
// Names:   plan/build/<coll>/<algo>/ranks:<n>/<size>     buildPlan for one rank (rank 0); counters ops, rounds.
//                                                       <size> is the larger buffer (nccl-tests' "size").
//          exec/ranks:1/copy_rounds:<k>                  the executor on a 1-rank world: k rounds of one
//                                                       8-byte Copy; counter step_s = time per round.
//          exec/ranks:2/sendrecv_rounds:<k>              2 ranks (threads, pinned): k rounds of an 8-byte
//                                                       send + receive each way; step_s per round.
//          exec/ranks:2/allreduce/<algo>/count:<c>       one 2-rank all-reduce plan run by the executor
//                                                       directly (no API, no selector, no plan cache).
//          api/ranks:1/<coll>/count:<c>[/inplace]        public C API on a 1-rank communicator: the fixed
//                                                       per-call overhead (validation, plan cache, executor).
//          api/ranks:2/allreduce/count:<c>               public C API, 2 ranks as 2 pinned threads of this
//                                                       process (float32 sum).
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/algorithms.h"
#include "src/executor.h"
#include "src/peer_links.h"
#include "src/wait.h"
#include "algorithms/plan.h"
#include "bench_util.h"
#include "conflux/conflux.h"
#include "core/config.h"
#include "shm_threads.h"

namespace {

using conflux::Algo;
using conflux::BufRef;
using conflux::Collective;
using conflux::ExecBuffers;
using conflux::ExecCall;
using conflux::ExecEnv;
using conflux::ExecWorkspace;
using conflux::Plan;
using conflux::PlanBuilder;
using conflux::PlanParams;
using conflux::bench::ScopedPin;
using conflux::bench::sizeLabel;
using conflux::bench::ThreadRanks;
using conflux::shm::ShmWorld;

// Per-element count of collective `c` whose larger buffer is `bytes` (float32).
uint64_t countFor(Collective c, uint64_t bytes, int nranks) {
  const uint64_t elts = bytes / 4;
  switch (c) {
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
      return elts / static_cast<uint64_t>(nranks);
    default:
      return elts;
  }
}

PlanParams paramsFor(Collective c, int nranks, int rank, uint64_t count, uint64_t stagingBytes) {
  PlanParams p;
  p.coll = c;
  p.nranks = nranks;
  p.rank = rank;
  p.count = count;
  p.eltSize = 4;
  p.root = 0;
  p.stagingBytes = stagingBytes;
  p.chunkBytes = conflux::kPipelineChunkBytes;
  return p;
}

uint64_t defaultStaging() {
  return static_cast<uint64_t>(conflux::config::getInt(conflux::config::Var::SHM_STAGING_BYTES));
}

// ---------------------------------------------------------------------------------------------------
// Plan building.

void benchBuildPlan(benchmark::State& state, Algo a, Collective c, int nranks, uint64_t bytes) {
  const PlanParams p = paramsFor(c, nranks, 0, countFor(c, bytes, nranks), defaultStaging());
  size_t ops = 0, rounds = 0;
  try {
    for (auto _ : state) {
      Plan plan = conflux::buildPlan(a, p);
      ops = plan.ops.size();
      rounds = plan.rounds.size();
      benchmark::DoNotOptimize(plan.ops.data());
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["rounds"] = static_cast<double>(rounds);
}

// ---------------------------------------------------------------------------------------------------
// The executor, driven directly.

ExecEnv envFor(ShmWorld& w, int rank, int nranks, const std::atomic<bool>* aborted) {
  ExecEnv env;
  env.local = &w;
  env.rank = rank;
  env.nranks = nranks;
  for (int r = 0; r < nranks; ++r) {
    env.localIndex.push_back(r);
    env.globalOfLocal.push_back(r);
  }
  env.timeoutMs = static_cast<int>(conflux::config::getInt(conflux::config::Var::TIMEOUT_MS));
  env.spinCount = static_cast<int>(conflux::config::getInt(conflux::config::Var::SPIN_COUNT));
  env.spinNs = std::clamp<int64_t>(conflux::config::getInt(conflux::config::Var::SPIN_US), 0, conflux::kMaxSpinUs) * 1000;
  env.streamStaging = conflux::streamStagingFromConfig();
  env.checkArgs = conflux::config::getBool(conflux::config::Var::CHECK_ARGS);
  env.aborted = aborted;
  conflux::linkPeers(env, conflux::choiceFromLocalIndex(env.localIndex));
  return env;
}

// One rank's state for running a plan over and over (buffers, workspace, call numbering).
struct PlanRunner {
  Plan plan;
  ExecEnv env;
  ExecWorkspace work;
  std::vector<std::byte> send, recv, scratch;
  ExecCall call;

  PlanRunner(Plan p, ExecEnv e, uint64_t sendBytes, uint64_t recvBytes, uint64_t count)
      : plan(std::move(p)), env(std::move(e)), send(sendBytes, std::byte{1}), recv(recvBytes),
        scratch(plan.scratchBytes) {
    call.count = count;
  }
  conflux::Status runOnce() {
    ExecBuffers bufs;
    bufs.send = send.data();
    bufs.recv = recv.data();
    bufs.scratch = scratch.data();
    call.seq++;
    if (plan.stagingBytes > 0) call.stagingEpoch++;
    return conflux::execute(plan, bufs, call, env, work);
  }
};

void setStepCounter(benchmark::State& state, int steps) {
  state.counters["step_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * steps,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void benchExecSoloCopies(benchmark::State& state, int rounds) {
  auto world = ShmWorld::create(
      [] {
        conflux::shm::ShmConfig cfg;
        cfg.dir = conflux::config::getString(conflux::config::Var::SHM_DIR);
        cfg.jobTag = conflux::bench::uniqueTag();
        cfg.globalRanks = {0};
        cfg.stagingBytes = 4096;
        return cfg;
      }(),
      conflux::shm::LocalExchange{[](const std::vector<uint8_t>& v) { return v; }, [] {}});
  PlanBuilder b("copies");
  for (int i = 0; i < rounds; ++i) {
    b.copy(BufRef::recv(8u * i), BufRef::send(8u * i), 8);
    b.nextRound();
  }
  PlanRunner run(b.finish(), envFor(*world, 0, 1, nullptr), 8u * rounds, 8u * rounds, 2u * rounds);
  for (auto _ : state) {
    if (!run.runOnce()) {
      state.SkipWithError("execute failed");
      return;
    }
  }
  setStepCounter(state, rounds);
}

Plan sendRecvPlan(int rank, int rounds) {
  PlanBuilder b("sendrecv");
  const int peer = 1 - rank;
  for (int i = 0; i < rounds; ++i) {
    b.send(peer, BufRef::send(8u * i), 8);
    b.recv(peer, BufRef::recv(8u * i), 8);
    b.nextRound();
  }
  return b.finish();
}

// Rank 1 of a 2-rank executor benchmark: runs its plan until the benchmark thread stops it (the stop
// flag is its ExecEnv::aborted, so a call blocked on rank 0 returns Aborted).
void runUntilStopped(ShmWorld& w, const std::atomic<bool>& stop, Plan plan, uint64_t sendBytes,
                     uint64_t recvBytes, uint64_t count) {
  PlanRunner run(std::move(plan), envFor(w, 1, 2, &stop), sendBytes, recvBytes, count);
  while (!stop.load(std::memory_order_relaxed)) {
    if (!run.runOnce()) return;
  }
}

void benchExecSendRecv(benchmark::State& state, int rounds) {
  const uint64_t bytes = 8u * rounds;
  ThreadRanks ranks(2, [=](ShmWorld& w, int, const std::atomic<bool>& stop) {
    runUntilStopped(w, stop, sendRecvPlan(1, rounds), bytes, bytes, bytes / 4);
  });
  PlanRunner run(sendRecvPlan(0, rounds), envFor(ranks.world(), 0, 2, nullptr), bytes, bytes, bytes / 4);
  for (auto _ : state) {
    if (!run.runOnce()) {
      state.SkipWithError("execute failed");
      return;
    }
  }
  setStepCounter(state, rounds);
}

void benchExecAllReduce(benchmark::State& state, Algo a, uint64_t count) {
  const uint64_t staging = defaultStaging();
  const uint64_t bytes = count * 4;
  Plan plan0, plan1;
  try {
    plan0 = conflux::buildPlan(a, paramsFor(Collective::AllReduce, 2, 0, count, staging));
    plan1 = conflux::buildPlan(a, paramsFor(Collective::AllReduce, 2, 1, count, staging));
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  ThreadRanks ranks(
      2,
      [&, bytes, count](ShmWorld& w, int, const std::atomic<bool>& stop) {
        runUntilStopped(w, stop, plan1, bytes, bytes, count);
      },
      staging);
  PlanRunner run(plan0, envFor(ranks.world(), 0, 2, nullptr), bytes, bytes, count);
  for (auto _ : state) {
    if (!run.runOnce()) {
      state.SkipWithError("execute failed");
      return;
    }
  }
  state.counters["rounds"] = static_cast<double>(plan0.rounds.size());
}

// ---------------------------------------------------------------------------------------------------
// The public C API.

// A 1-rank communicator shared by every api/ranks:1 benchmark (made on first use, destroyed in main).
cfxComm_t g_soloComm = nullptr;

cfxComm_t soloComm() {
  if (g_soloComm == nullptr) {
    cfxUniqueId id;
    if (cfxGetUniqueId(&id) != cfxSuccess || cfxCommInitRank(&g_soloComm, 1, id, 0) != cfxSuccess) {
      std::fprintf(stderr, "bench_plan: 1-rank communicator: %s\n", cfxGetLastError(nullptr));
      g_soloComm = nullptr;
    }
  }
  return g_soloComm;
}

cfxResult_t callCollective(Collective c, const float* send, float* recv, size_t count, cfxComm_t comm) {
  switch (c) {
    case Collective::AllReduce: return cfxAllReduce(send, recv, count, cfxFloat32, cfxSum, comm, nullptr);
    case Collective::AllGather: return cfxAllGather(send, recv, count, cfxFloat32, comm, nullptr);
    case Collective::ReduceScatter: return cfxReduceScatter(send, recv, count, cfxFloat32, cfxSum, comm, nullptr);
    case Collective::Broadcast: return cfxBroadcast(send, recv, count, cfxFloat32, 0, comm, nullptr);
    case Collective::Reduce: return cfxReduce(send, recv, count, cfxFloat32, cfxSum, 0, comm, nullptr);
    case Collective::AllToAll: return cfxAllToAll(send, recv, count, cfxFloat32, comm, nullptr);
    default: return cfxInvalidArgument;
  }
}

void benchApiSolo(benchmark::State& state, Collective c, size_t count, bool inPlace) {
  cfxComm_t comm = soloComm();
  if (comm == nullptr) {
    state.SkipWithError("could not create a 1-rank communicator");
    return;
  }
  std::vector<float> send(count, 1.0f), recv(count, 0.0f);
  const float* src = inPlace ? recv.data() : send.data();
  for (auto _ : state) {
    if (callCollective(c, src, recv.data(), count, comm) != cfxSuccess) {
      state.SkipWithError(cfxGetLastError(nullptr));
      return;
    }
    benchmark::ClobberMemory();
  }
}

// 2 ranks as 2 threads: rank 1 repeats the all-reduce until element 0 of the result is non-zero, which
// rank 0 sends once after the timed loop.
void benchApiPair(benchmark::State& state, size_t count) {
  cfxUniqueId id;
  if (cfxGetUniqueId(&id) != cfxSuccess) {
    state.SkipWithError(cfxGetLastError(nullptr));
    return;
  }
  std::atomic<int> helperFailed{0};
  std::thread helper([&] {
    ScopedPin pin(1);
    cfxComm_t comm = nullptr;
    if (cfxCommInitRank(&comm, 2, id, 1) != cfxSuccess) {
      helperFailed = 1;
      return;
    }
    std::vector<float> send(count, 0.0f), recv(count, 0.0f);
    do {
      if (cfxAllReduce(send.data(), recv.data(), count, cfxFloat32, cfxSum, comm, nullptr) != cfxSuccess) {
        helperFailed = 2;
        break;
      }
    } while (recv[0] == 0.0f);
    cfxCommDestroy(comm);
  });
  ScopedPin pin(0);
  cfxComm_t comm = nullptr;
  if (cfxCommInitRank(&comm, 2, id, 0) != cfxSuccess) {
    std::string err = cfxGetLastError(nullptr);
    helper.join();
    state.SkipWithError(err.c_str());
    return;
  }
  std::vector<float> send(count, 0.0f), recv(count, 0.0f);
  bool ok = true;
  for (auto _ : state) {
    if (cfxAllReduce(send.data(), recv.data(), count, cfxFloat32, cfxSum, comm, nullptr) != cfxSuccess) {
      ok = false;
      break;
    }
  }
  send[0] = 1.0f;  // tells rank 1 to stop
  if (ok) ok = cfxAllReduce(send.data(), recv.data(), count, cfxFloat32, cfxSum, comm, nullptr) == cfxSuccess;
  if (!ok) cfxCommAbort(comm);
  helper.join();
  cfxCommDestroy(comm);
  if (!ok || helperFailed.load() != 0) state.SkipWithError("a 2-rank all-reduce failed");
}

// ---------------------------------------------------------------------------------------------------

void registerAll() {
  const Collective others[] = {Collective::AllGather, Collective::ReduceScatter, Collective::Broadcast,
                               Collective::Reduce, Collective::AllToAll};
  for (Algo a : conflux::algosFor(Collective::AllReduce)) {
    for (int n : {2, 8, 64}) {
      if (!conflux::algoSupports(a, Collective::AllReduce, n)) continue;
      for (uint64_t bytes : {uint64_t{1} << 10, uint64_t{64} << 20}) {
        const std::string name = "plan/build/allreduce/" + std::string(conflux::algoName(a)) + "/ranks:" +
                                 std::to_string(n) + "/" + sizeLabel(bytes);
        benchmark::RegisterBenchmark(name.c_str(), benchBuildPlan, a, Collective::AllReduce, n, bytes);
      }
    }
  }
  for (Collective c : others) {
    for (Algo a : conflux::algosFor(c)) {
      if (!conflux::algoSupports(a, c, 8)) continue;
      const std::string name = "plan/build/" + std::string(conflux::collectiveName(c)) + "/" +
                               std::string(conflux::algoName(a)) + "/ranks:8/1MiB";
      benchmark::RegisterBenchmark(name.c_str(), benchBuildPlan, a, c, 8, uint64_t{1} << 20);
    }
  }

  for (int k : {1, 16, 256}) {
    benchmark::RegisterBenchmark(("exec/ranks:1/copy_rounds:" + std::to_string(k)).c_str(), benchExecSoloCopies, k);
  }
  const bool twoCpus = conflux::bench::allowedCpus() >= 2;
  for (int k : {1, 16}) {
    benchmark::RegisterBenchmark(("exec/ranks:2/sendrecv_rounds:" + std::to_string(k)).c_str(), benchExecSendRecv, k)
        ->UseRealTime();
  }
  for (Algo a : conflux::algosFor(Collective::AllReduce)) {
    if (!conflux::algoSupports(a, Collective::AllReduce, 2)) continue;
    for (uint64_t count : {uint64_t{1}, uint64_t{256}}) {
      const std::string name = "exec/ranks:2/allreduce/" + std::string(conflux::algoName(a)) +
                               "/count:" + std::to_string(count);
      benchmark::RegisterBenchmark(name.c_str(), benchExecAllReduce, a, count)->UseRealTime();
    }
  }

  const Collective apiColls[] = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                                 Collective::Broadcast, Collective::AllToAll};
  for (Collective c : apiColls) {
    const std::string base = "api/ranks:1/" + std::string(conflux::collectiveName(c));
    const std::vector<size_t> counts = c == Collective::AllReduce ? std::vector<size_t>{1, 256} : std::vector<size_t>{256};
    for (size_t count : counts) {
      const std::string name = base + "/count:" + std::to_string(count);
      benchmark::RegisterBenchmark(name.c_str(), benchApiSolo, c, count, false);
    }
  }
  benchmark::RegisterBenchmark("api/ranks:1/allreduce/count:256/inplace", benchApiSolo, Collective::AllReduce,
                               size_t{256}, true);
  for (size_t count : {size_t{1}, size_t{256}}) {
    const std::string name = "api/ranks:2/allreduce/count:" + std::to_string(count);
    auto* b = benchmark::RegisterBenchmark(name.c_str(), benchApiPair, count)->UseRealTime();
    if (!twoCpus) b->Iterations(2000);  // threads share one core: keep it short
  }
}

}  // namespace

int main(int argc, char** argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (g_soloComm != nullptr) cfxCommDestroy(g_soloComm);
  return 0;
}
