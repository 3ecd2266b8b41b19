// The public API on real processes: argument errors name the argument and corrupt nothing, group
// send/recv batches cannot deadlock, and the C++ API (RAII, spans, async requests, exceptions) works.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <sched.h>
#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unistd.h>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "conflux/conflux.hpp"
#include "tests/multiproc/harness.h"
#include "tests/multiproc/init_logs.h"

using namespace conflux::testing;

namespace {

TEST(Api, BadArgumentsNameTheArgumentAndCorruptNothing) {
  auto out = runRanks(2, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    EXPECT_EQ(cfxCommInitRank(nullptr, nranks, id, rank), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("comm"));
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    std::vector<float> buf(64, 1.0f), res(64, 0.0f);
    EXPECT_EQ(cfxAllReduce(nullptr, res.data(), 64, cfxFloat32, cfxSum, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("sendbuff"));
    EXPECT_EQ(cfxAllReduce(buf.data(), nullptr, 64, cfxFloat32, cfxSum, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("recvbuff"));
    EXPECT_EQ(cfxAllReduce(buf.data(), res.data(), 64, static_cast<cfxDataType_t>(42), cfxSum, comm, nullptr),
              cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("datatype"));
    EXPECT_EQ(cfxAllReduce(buf.data(), res.data(), 64, cfxFloat32, static_cast<cfxRedOp_t>(-1), comm, nullptr),
              cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("op"));
    EXPECT_EQ(cfxAllReduce(buf.data(), res.data(), std::numeric_limits<size_t>::max(), cfxFloat32, cfxSum, comm,
                           nullptr),
              cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("count"));
    EXPECT_EQ(cfxAllGather(buf.data(), res.data(), std::numeric_limits<size_t>::max() / 8, cfxFloat64, comm, nullptr),
              cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("count"));
    EXPECT_EQ(cfxBroadcast(buf.data(), buf.data(), 64, cfxFloat32, 7, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("root"));
    EXPECT_EQ(cfxReduce(buf.data(), res.data(), 64, cfxFloat32, cfxSum, -1, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("root"));
    EXPECT_EQ(cfxSend(buf.data(), 64, cfxFloat32, 9, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("peer"));
    EXPECT_EQ(cfxRecv(nullptr, 64, cfxFloat32, 0, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("recvbuff"));
    EXPECT_EQ(cfxAllReduce(buf.data(), res.data(), 64, cfxFloat32, cfxSum, nullptr, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("comm"));
    int fakeStream = 0;
    EXPECT_EQ(cfxAllReduce(buf.data(), res.data(), 64, cfxFloat32, cfxSum, comm, &fakeStream), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("stream"));
    EXPECT_EQ(cfxAllToAll(buf.data(), buf.data(), 4, cfxFloat32, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("in-place"));
    EXPECT_EQ(cfxAllReduce(buf.data(), buf.data() + 1, 32, cfxFloat32, cfxSum, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("overlap"));
    EXPECT_STREQ(cfxGetErrorString(cfxRemoteError), "remote process exited or there was a network error");
    // None of that touched the buffers or broke the communicator.
    for (float v : res) EXPECT_EQ(v, 0.0f);
    for (float v : buf) EXPECT_EQ(v, 1.0f);
    EXPECT_EQ(cfxAllReduce(buf.data(), res.data(), 64, cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    for (float v : res) EXPECT_EQ(v, 2.0f);
    cfxResult_t async;
    EXPECT_EQ(cfxCommGetAsyncError(comm, &async), cfxSuccess);
    EXPECT_EQ(async, cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

class GroupSendRecv : public ::testing::TestWithParam<int> {};

// Everyone sends 4 MiB to the right and receives from the left in one group (larger than the channels,
// so ungrouped blocking sends would deadlock), plus a message to itself.
TEST_P(GroupSendRecv, RingExchangeDoesNotDeadlock) {
  auto out = runRanks(GetParam(), [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    const size_t count = 1 << 20;
    std::vector<int32_t> send(count), recv(count, -1), self(3, 0);
    const int32_t mine[3] = {rank, rank + 1, rank + 2};
    for (size_t i = 0; i < count; ++i) send[i] = static_cast<int32_t>(rank * 1000003 + i);
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    EXPECT_EQ(cfxGroupStart(), cfxSuccess);
    EXPECT_EQ(cfxSend(send.data(), count, cfxInt32, right, comm, nullptr), cfxSuccess);
    EXPECT_EQ(cfxRecv(recv.data(), count, cfxInt32, left, comm, nullptr), cfxSuccess);
    EXPECT_EQ(cfxSend(mine, 3, cfxInt32, rank, comm, nullptr), cfxSuccess);
    EXPECT_EQ(cfxRecv(self.data(), 3, cfxInt32, rank, comm, nullptr), cfxSuccess);
    EXPECT_EQ(cfxGroupEnd(), cfxSuccess) << cfxGetLastError(comm);
    for (size_t i = 0; i < count; ++i) {
      if (recv[i] != static_cast<int32_t>(left * 1000003 + i)) {
        ADD_FAILURE() << "element " << i << " from rank " << left;
        break;
      }
    }
    EXPECT_EQ(self[0], rank);
    EXPECT_EQ(self[2], rank + 2);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

INSTANTIATE_TEST_SUITE_P(Ranks, GroupSendRecv, ::testing::Values(1, 2, 3, 5));

// Loading libconflux (and with it libfabric, whose PSM provider's libinfinipath installs handlers for
// these signals) leaves the program's signal dispositions as they were: no handler from libinfinipath.
TEST(Api, LoadingTheLibraryLeavesSignalHandlersAlone) {
  int version = 0;
  ASSERT_EQ(cfxGetVersion(&version), cfxSuccess);  // the library is loaded and initialised
  for (int sig : {SIGILL, SIGABRT, SIGBUS, SIGSEGV, SIGTERM}) {
    struct sigaction sa {};
    ASSERT_EQ(sigaction(sig, nullptr, &sa), 0);
    const void* fn = (sa.sa_flags & SA_SIGINFO) != 0 ? reinterpret_cast<const void*>(sa.sa_sigaction)
                                                      : reinterpret_cast<const void*>(sa.sa_handler);
    Dl_info info{};
    if (fn != reinterpret_cast<const void*>(SIG_DFL) && fn != reinterpret_cast<const void*>(SIG_IGN) &&
        dladdr(fn, &info) != 0 && info.dli_fname != nullptr) {
      EXPECT_EQ(std::string(info.dli_fname).find("libinfinipath"), std::string::npos)
          << "signal " << sig << " is handled by " << info.dli_fname;
    }
  }
}

TEST(Api, PlainSendRecvOutsideAGroup) {
  auto out = runRanks(2, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    std::vector<double> v(1000, rank == 0 ? 3.5 : 0.0);
    if (rank == 0) EXPECT_EQ(cfxSend(v.data(), v.size(), cfxFloat64, 1, comm, nullptr), cfxSuccess);
    else EXPECT_EQ(cfxRecv(v.data(), v.size(), cfxFloat64, 0, comm, nullptr), cfxSuccess);
    for (double x : v) EXPECT_EQ(x, 3.5);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

/// Sends and receives between some ranks only, with collectives of all ranks between them: the ranks
/// left out of a send or receive still agree with the others on every later call. Four ranks, on one
/// node or (`nodes` 2) two simulated nodes {0, 1} and {2, 3} joined by the network transport `net`.
void sendRecvAmongSomeRanks(int nodes, const char* net = "auto") {
  auto out = runRanks(4, [nodes, net](int rank, int n, const cfxUniqueId& id) -> int {
    if (nodes > 1) simulateNode(rank / 2);
    setenv("CONFLUX_NET", net, 1);
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    const auto allReduceGives = [&](float want, const char* when) {
      std::vector<float> v(20000, static_cast<float>(rank + 1));  // 80 KB: a plan, not eager
      EXPECT_EQ(cfxAllReduce(v.data(), v.data(), v.size(), cfxFloat32, cfxSum, comm, nullptr), cfxSuccess)
          << when << ": " << cfxGetLastError(comm);
      EXPECT_EQ(v.back(), want) << when;
    };
    // Rank 0 sends to 2 and then to 3, one call each; 1 takes no part.
    std::vector<int32_t> m(777, 0);
    if (rank == 0) {
      for (int peer : {2, 3}) {
        std::fill(m.begin(), m.end(), 100 + peer);
        EXPECT_EQ(cfxSend(m.data(), m.size(), cfxInt32, peer, comm, nullptr), cfxSuccess) << cfxGetLastError(comm);
      }
    } else if (rank >= 2) {
      EXPECT_EQ(cfxRecv(m.data(), m.size(), cfxInt32, 0, comm, nullptr), cfxSuccess) << cfxGetLastError(comm);
      EXPECT_EQ(m.back(), 100 + rank);
    }
    allReduceGives(10.0f, "after sends from rank 0");
    // Rank 3 sends to 1 twice (two calls), 1 receives both in one group; 0 and 2 take no part.
    if (rank == 3) {
      for (int k = 0; k < 2; ++k) {
        std::fill(m.begin(), m.end(), 7 + k);
        EXPECT_EQ(cfxSend(m.data(), m.size(), cfxInt32, 1, comm, nullptr), cfxSuccess) << cfxGetLastError(comm);
      }
    } else if (rank == 1) {
      std::vector<int32_t> a(777, 0), b(777, 0);
      EXPECT_EQ(cfxGroupStart(), cfxSuccess);
      EXPECT_EQ(cfxRecv(a.data(), a.size(), cfxInt32, 3, comm, nullptr), cfxSuccess);
      EXPECT_EQ(cfxRecv(b.data(), b.size(), cfxInt32, 3, comm, nullptr), cfxSuccess);
      EXPECT_EQ(cfxGroupEnd(), cfxSuccess) << cfxGetLastError(comm);
      EXPECT_EQ(a.back(), 7);
      EXPECT_EQ(b.back(), 8);
    }
    allReduceGives(10.0f, "after sends from rank 3");
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, RunOptions{60, {}, {}});
  EXPECT_TRUE(allSucceeded(out));
}

TEST(Api, SendRecvAmongSomeRanksOnOneNode) { sendRecvAmongSomeRanks(1); }
TEST(Api, SendRecvAmongSomeRanksAcrossNodes) { sendRecvAmongSomeRanks(2); }
TEST(Api, SendRecvAmongSomeRanksAcrossNodesOverTcp) { sendRecvAmongSomeRanks(2, "tcp"); }

TEST(CppApi, SpansAsyncRequestsAndExceptions) {
  auto out = runRanks(3, [](int rank, int n, const cfxUniqueId& rawId) -> int {
    std::array<char, CFX_UNIQUE_ID_BYTES> bytes;
    std::memcpy(bytes.data(), rawId.internal, bytes.size());
    conflux::Communicator comm(n, conflux::UniqueId::fromBytes(bytes), rank);
    EXPECT_EQ(comm.rank(), rank);
    EXPECT_EQ(comm.size(), n);
    EXPECT_EQ(comm.localSize(), n);

    std::vector<float> data(1000, static_cast<float>(rank + 1));
    comm.allReduce(std::span<float>(data));
    for (float v : data) EXPECT_EQ(v, 6.0f);

    // Several asynchronous calls in flight complete in issue order.
    std::vector<int64_t> a(4096, rank), b(4096 * 3), c(4096, 1);
    std::vector<int64_t> cOut(4096);
    auto r1 = comm.allGatherAsync(std::span<const int64_t>(a), std::span<int64_t>(b));
    auto r2 = comm.allReduceAsync(std::span<const int64_t>(c), std::span<int64_t>(cOut), cfxMax);
    r2.wait();
    EXPECT_TRUE(r1.test());
    r1.wait();
    for (int r = 0; r < n; ++r) EXPECT_EQ(b[static_cast<size_t>(r) * 4096 + 17], r);
    EXPECT_EQ(cOut[5], 1);

    std::vector<uint8_t> bc(33, rank == 2 ? 9 : 0);
    comm.broadcast(std::span<uint8_t>(bc), 2);
    EXPECT_EQ(bc[32], 9);

    std::vector<double> rsIn(3 * 5, 1.5), rsOut(5);
    comm.reduceScatter(std::span<const double>(rsIn), std::span<double>(rsOut));
    EXPECT_EQ(rsOut[4], 4.5);

    try {
      std::vector<float> small(1);
      comm.allGather(std::span<const float>(data), std::span<float>(small));
      ADD_FAILURE() << "expected an exception";
    } catch (const conflux::Exception& e) {
      EXPECT_EQ(e.result(), cfxInvalidArgument);
    }
    try {
      comm.broadcast(std::span<float>(data), 99);
      ADD_FAILURE() << "expected an exception";
    } catch (const conflux::Exception& e) {
      EXPECT_EQ(e.result(), cfxInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("root"), std::string::npos) << e.what();
    }
    std::vector<int32_t> mine(10), in(10);
    for (int i = 0; i < 10; ++i) mine[i] = rank * 10 + i;
    comm.sendRecv(std::span<const int32_t>(mine), (rank + 1) % n, std::span<int32_t>(in), (rank + n - 1) % n);
    EXPECT_EQ(in[3], ((rank + n - 1) % n) * 10 + 3);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

// The C++ forms of the calls added for bindings: settings, split, gather/scatter, all-to-all-v and a
// pre-multiplied sum (RAII), on 3 ranks.
TEST(CppApi, ConfigSplitVectorCallsAndPreMulSum) {
  auto out = runRanks(3, [](int rank, int n, const cfxUniqueId& rawId) -> int {
    std::array<char, CFX_UNIQUE_ID_BYTES> bytes;
    std::memcpy(bytes.data(), rawId.internal, bytes.size());
    conflux::Config cfg;
    cfg.timeoutMs = 20000;
    cfg.name = "cpp";
    conflux::Communicator comm(n, conflux::UniqueId::fromBytes(bytes), rank, cfg);
    // An asynchronous call in flight first: the calls below must keep issue order behind it.
    std::vector<int32_t> big(1 << 16, rank), bigOut(1 << 16);
    auto pending = comm.allReduceAsync(std::span<const int32_t>(big), std::span<int32_t>(bigOut));
    std::vector<double> mine(4, rank + 0.5), all(rank == 1 ? 12 : 0);
    comm.gather(std::span<const double>(mine), std::span<double>(all), 1);
    if (rank == 1) {
      for (int r = 0; r < n; ++r) EXPECT_EQ(all[static_cast<size_t>(r) * 4 + 3], r + 0.5);
    }
    std::vector<int64_t> blocks(rank == 2 ? 6 : 0), got(2);
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int64_t>(i * 10);
    comm.scatter(std::span<const int64_t>(blocks), std::span<int64_t>(got), 2);
    EXPECT_EQ(got[1], (rank * 2 + 1) * 10);
    // rank i sends i + 1 elements to everyone
    std::vector<float> send(static_cast<size_t>(rank) + 1, static_cast<float>(rank));
    std::vector<size_t> sc(n, static_cast<size_t>(rank) + 1), sd(n, 0), rc(n), rd(n);
    size_t total = 0;
    for (int q = 0; q < n; ++q) {
      rc[q] = static_cast<size_t>(q) + 1;
      rd[q] = total;
      total += rc[q];
    }
    std::vector<float> recv(total, -1.0f);
    comm.allToAllv(std::span<const float>(send), std::span<const size_t>(sc), std::span<const size_t>(sd),
                   std::span<float>(recv), std::span<const size_t>(rc), std::span<const size_t>(rd));
    for (int q = 0; q < n; ++q) EXPECT_EQ(recv[rd[q] + rc[q] - 1], static_cast<float>(q));
    pending.wait();
    EXPECT_EQ(bigOut[123], 0 + 1 + 2);
    {
      conflux::PreMulSum<float> premul(comm, static_cast<float>(rank + 1));
      std::vector<float> x(100, 2.0f);
      comm.allReduce(std::span<float>(x), premul.op());
      EXPECT_EQ(x[99], 2.0f * (1 + 2 + 3));
    }
    // An asynchronous call still queued when its PreMulSum goes out of scope keeps the op until it ran.
    std::vector<float> y(1 << 16, 1.0f), yOut(1 << 16);
    conflux::Request late;
    {
      conflux::PreMulSum<float> premul(comm, 0.5f);
      late = comm.allReduceAsync(std::span<const float>(y), std::span<float>(yOut), premul.op());
    }
    late.wait();
    EXPECT_EQ(yOut[777], 0.5f * n);
    // Split: ranks 0 and 2 together (reversed by key), rank 1 alone, then nobody in the second split.
    auto pair = comm.split(rank == 1 ? 1 : 0, -rank);
    EXPECT_TRUE(pair.has_value());
    if (pair) {
      EXPECT_EQ(pair->size(), rank == 1 ? 1 : 2);
      EXPECT_EQ(pair->rank(), rank == 0 ? 1 : 0);
      std::vector<int32_t> v(10, rank);
      pair->allReduce(std::span<int32_t>(v));
      EXPECT_EQ(v[9], rank == 1 ? 1 : 2);
    }
    EXPECT_FALSE(comm.split(-1, 0).has_value());
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

}  // namespace

namespace {

std::string readFile(const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return {};
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  fclose(f);
  return text;
}

// With CONFLUX_DEBUG=INFO every call logs the algorithm that ran and why, including a forced one.
TEST(Api, MemAllocAndRegistrationCheckTheirArguments) {
  auto out = runRanks(1, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    void* p = nullptr;
    EXPECT_EQ(cfxMemAlloc(nullptr, 64), cfxInvalidArgument);
    EXPECT_NE(std::string(cfxGetLastError(nullptr)).find("ptr"), std::string::npos);
    EXPECT_EQ(cfxMemAlloc(&p, 0), cfxInvalidArgument);
    EXPECT_NE(std::string(cfxGetLastError(nullptr)).find("size"), std::string::npos);
    EXPECT_EQ(p, nullptr);
    EXPECT_EQ(cfxMemAlloc(&p, 100), cfxSuccess);
    if (p == nullptr) return 3;
    EXPECT_EQ(static_cast<unsigned char*>(p)[99], 0);  // zero-filled
    int local = 0;
    EXPECT_EQ(cfxMemFree(&local), cfxInvalidArgument);
    EXPECT_NE(std::string(cfxGetLastError(nullptr)).find("cfxMemAlloc"), std::string::npos);
    EXPECT_EQ(cfxMemFree(static_cast<char*>(p) + 8), cfxInvalidArgument);  // not the start of a block

    void* h1 = nullptr;
    void* h2 = nullptr;
    EXPECT_EQ(cfxCommRegister(comm, p, 100, nullptr), cfxInvalidArgument);
    EXPECT_EQ(cfxCommRegister(comm, nullptr, 100, &h1), cfxInvalidArgument);
    EXPECT_NE(std::string(cfxGetLastError(nullptr)).find("buff"), std::string::npos);
    EXPECT_EQ(cfxCommRegister(comm, p, 0, &h1), cfxInvalidArgument);
    EXPECT_EQ(cfxCommRegister(nullptr, p, 100, &h1), cfxInvalidArgument);
    EXPECT_EQ(cfxCommRegister(comm, p, 100, &h1), cfxSuccess);
    EXPECT_EQ(cfxCommRegister(comm, &local, sizeof local, &h2), cfxSuccess);  // private memory: accepted
    EXPECT_NE(h1, nullptr);
    EXPECT_NE(h1, h2);
    EXPECT_EQ(cfxCommDeregister(comm, h1), cfxSuccess);
    EXPECT_EQ(cfxCommDeregister(comm, h1), cfxInvalidArgument);  // twice
    EXPECT_NE(std::string(cfxGetLastError(nullptr)).find("handle"), std::string::npos);
    EXPECT_EQ(cfxCommDeregister(comm, h2), cfxSuccess);
    EXPECT_EQ(cfxMemFree(p), cfxSuccess);
    EXPECT_EQ(cfxMemFree(nullptr), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

TEST(Api, InfoLogNamesTheAlgorithmAndTheReason) {
  const std::string dir = ::testing::TempDir();
  RunOptions opts;
  opts.env = {{"CONFLUX_DEBUG", "INFO"}, {"CONFLUX_DEBUG_SUBSYS", "COLL"},
              {"CONFLUX_DEBUG_FILE", dir + "/conflux-log-%p.txt"}, {"CONFLUX_ALGO", "broadcast=tree"}};
  auto out = runRanks(2, [&](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    std::vector<float> v(1 << 20, 1.0f);
    EXPECT_EQ(cfxAllReduce(v.data(), v.data(), 2, cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    EXPECT_EQ(cfxAllReduce(v.data(), v.data(), 20000, cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    EXPECT_EQ(cfxAllReduce(v.data(), v.data(), v.size(), cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    EXPECT_EQ(cfxBroadcast(v.data(), v.data(), 10, cfxFloat32, 0, comm, nullptr), cfxSuccess);
    void* shared = nullptr;
    EXPECT_EQ(cfxMemAlloc(&shared, 1 << 20), cfxSuccess);
    EXPECT_EQ(cfxAllReduce(shared, shared, (1 << 20) / 4, cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    EXPECT_EQ(cfxMemFree(shared), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    std::string log = readFile(dir + "/conflux-log-" + std::to_string(getpid()) + ".txt");
    EXPECT_NE(log.find("allreduce count=2 float32 sum root=0: eager (input fits an eager slot"), std::string::npos) << log;
    // 80000 bytes per rank: over the eager limit (64 KiB on 2 ranks) and the one-shot's.
    EXPECT_NE(log.find("allreduce count=20000 float32 sum root=0: twoshot"), std::string::npos) << log;
    EXPECT_NE(log.find("2 ranks share memory"), std::string::npos) << log;
    EXPECT_NE(log.find("broadcast count=10 float32"), std::string::npos) << log;
    EXPECT_NE(log.find("forced by CONFLUX_ALGO"), std::string::npos) << log;
    EXPECT_NE(log.find("reach each other's buffers (mapped, or read with process_vm_readv): direct"), std::string::npos) << log;
    std::remove((dir + "/conflux-log-" + std::to_string(getpid()) + ".txt").c_str());
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

// CONFLUX_ALGO=eager is a strategy like the plans: forced, it takes every input that fits a slot even
// with CONFLUX_EAGER_BYTES=0, falls back (saying why) for larger ones, and the TUNING explanations list
// every candidate with its predicted time.
TEST(Api, ForcedEagerAndExplanationsWithPredictedTimes) {
  const std::string dir = ::testing::TempDir();
  RunOptions opts;
  opts.env = {{"CONFLUX_DEBUG", "INFO"}, {"CONFLUX_DEBUG_SUBSYS", "COLL,TUNING"},
              {"CONFLUX_DEBUG_FILE", dir + "/conflux-eager-log-%p.txt"}, {"CONFLUX_ALGO", "allreduce=eager"},
              {"CONFLUX_EAGER_BYTES", "0"}};
  auto out = runRanks(3, [&](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    std::vector<float> v(1 << 16, 1.0f);
    EXPECT_EQ(cfxAllReduce(v.data(), v.data(), 1000, cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    EXPECT_EQ(v[999], 3.0f);
    EXPECT_EQ(cfxAllReduce(v.data(), v.data(), v.size(), cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    EXPECT_EQ(v[0], 9.0f);
    EXPECT_EQ(cfxBroadcast(v.data(), v.data(), 10, cfxFloat32, 0, comm, nullptr), cfxSuccess);  // not forced
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    const std::string path = dir + "/conflux-eager-log-" + std::to_string(getpid()) + ".txt";
    const std::string log = readFile(path);
    EXPECT_NE(log.find("allreduce count=1000 float32 sum root=0: eager"), std::string::npos) << log;
    if (rank == 0) {  // the explanations come from rank 0
      EXPECT_NE(log.find("allreduce of 4000 bytes per rank on 3 ranks: eager, because forced by CONFLUX_ALGO"),
                std::string::npos) << log;
      EXPECT_NE(log.find("predicted (defaults): eager "), std::string::npos) << log;
      EXPECT_NE(log.find("; plans: oneshot "), std::string::npos) << log;
      EXPECT_NE(log.find("CONFLUX_ALGO=eager does not apply to allreduce here"), std::string::npos) << log;
      // CONFLUX_EAGER_BYTES=0 keeps the broadcast, which nothing forces, off the eager path.
      EXPECT_EQ(log.find("broadcast of 40 bytes per rank"), std::string::npos) << log;
      EXPECT_NE(log.find("broadcast of 40 bytes on 3 ranks: oneshot"), std::string::npos) << log;
    }
    std::remove(path.c_str());
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

// CONFLUX_EAGER_BYTES=auto (the default): 64 KiB of input per rank go eager on up to 4 local ranks, 32 KiB
// on 5 to 8, and a byte more takes a plan.
class AutoEagerLimit : public ::testing::TestWithParam<int> {};

TEST_P(AutoEagerLimit, FollowsTheRankCount) {
  const std::string dir = ::testing::TempDir();
  const int nranks = GetParam();
  const uint64_t limitFloats = (nranks <= 4 ? 65536 : 32768) / sizeof(float);
  RunOptions opts;
  opts.env = {{"CONFLUX_DEBUG", "INFO"}, {"CONFLUX_DEBUG_SUBSYS", "COLL"},
              {"CONFLUX_DEBUG_FILE", dir + "/conflux-auto-eager-%p.txt"}};
  auto out = runRanks(nranks, [&](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    std::vector<float> v(limitFloats + 1, 1.0f);
    EXPECT_EQ(cfxAllReduce(v.data(), v.data(), limitFloats, cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    EXPECT_EQ(v[limitFloats - 1], float(n));
    EXPECT_EQ(cfxAllReduce(v.data(), v.data(), limitFloats + 1, cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    EXPECT_EQ(v[limitFloats], float(n));
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    const std::string path = dir + "/conflux-auto-eager-" + std::to_string(getpid()) + ".txt";
    const std::string log = readFile(path);
    const std::string at = "allreduce count=" + std::to_string(limitFloats) + " float32 sum root=0: ";
    const std::string above = "allreduce count=" + std::to_string(limitFloats + 1) + " float32 sum root=0: ";
    EXPECT_NE(log.find(at + "eager"), std::string::npos) << log;
    EXPECT_NE(log.find(above), std::string::npos) << log;
    EXPECT_EQ(log.find(above + "eager"), std::string::npos) << log;
    std::remove(path.c_str());
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

INSTANTIATE_TEST_SUITE_P(Ranks, AutoEagerLimit, ::testing::Values(2, 5),
                         [](const auto& p) { return std::to_string(p.param) + "ranks"; });

// CONFLUX_COST_SAVE: rank 0 of a communicator across (simulated) nodes writes the parameters it selects
// with, in CONFLUX_COST_FILE's format; read back through CONFLUX_COST_FILE by the next communicator, they
// are the same numbers (to a rounding: the file's units are not the model's).
TEST(Api, CostSaveWritesParametersThatReadBackExactly) {
  const std::string dir = ::testing::TempDir();
  const std::string probed = dir + "/conflux-cost-probed-" + std::to_string(getpid()) + ".txt";
  const std::string reread = dir + "/conflux-cost-reread-" + std::to_string(getpid()) + ".txt";
  auto out = runRanks(4, [&](int rank, int n, const cfxUniqueId& id) -> int {
    simulateNode(rank / 2);
    setenv("CONFLUX_COST_PROBE", "1", 1);
    unsetenv("CONFLUX_COST_FILE");
    setenv("CONFLUX_COST_SAVE", probed.c_str(), 1);
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  ASSERT_TRUE(allSucceeded(out));
  const std::string first = readFile(probed);
  EXPECT_NE(first.find("# cost model parameters (source: probe; chunk "), std::string::npos) << first;
  for (const char* key : {"\nintra_alpha_us=", "\nintra_gbytes_per_s=", "\ninter_alpha_us=", "\ninter_gbytes_per_s=",
                          "\nreduce_gbytes_per_s=", "\nnics_per_node=1\n", "\nextra_message="}) {
    EXPECT_NE(first.find(key), std::string::npos) << key << " in " << first;
  }
  out = runRanks(4, [&](int rank, int n, const cfxUniqueId& id) -> int {
    simulateNode(rank / 2);
    setenv("CONFLUX_COST_FILE", probed.c_str(), 1);
    setenv("CONFLUX_COST_SAVE", reread.c_str(), 1);
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  ASSERT_TRUE(allSucceeded(out));
  const std::string second = readFile(reread);
  // The source is the file's path, as much of it as a communicator keeps (47 characters).
  EXPECT_NE(second.find("(source: " + probed.substr(0, 40)), std::string::npos) << second;
  const auto values = [](const std::string& text) {  // key=value lines as numbers, comments left out
    std::vector<std::pair<std::string, double>> kv;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      const size_t eq = line.find('=');
      kv.emplace_back(line.substr(0, eq), std::stod(line.substr(eq + 1)));
    }
    return kv;
  };
  const auto a = values(first), b = values(second);
  ASSERT_EQ(a.size(), 7u) << first;
  ASSERT_EQ(b.size(), 7u) << second;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_DOUBLE_EQ(a[i].second, b[i].second) << a[i].first;
  }
  std::remove(probed.c_str());
  std::remove(reread.c_str());
}

// The probe measures what each further message of a round adds to its latency (extra_message) where rank 0
// has 2 ranks or more on other nodes to fan out to (3 nodes of one rank here); 2 nodes of one rank keep the
// model's default and say so. Either way the saved parameters carry the value used.
TEST(Api, CostProbeMeasuresTheExtraMessageWithTwoRanksElsewhere) {
  for (int nodes : {3, 2}) {
    const InitLogs logs;
    RunOptions opts = logs.options();
    for (auto& [name, value] : opts.env) {
      if (name == "CONFLUX_DEBUG_SUBSYS") value = "INIT,TUNING";
    }
    const std::string saved = ::testing::TempDir() + "/conflux-cost-extra-" + std::to_string(getpid()) + ".txt";
    auto out = runRanks(nodes, [&](int rank, int n, const cfxUniqueId& id) -> int {
      simulateNode(rank);
      setenv("CONFLUX_COST_PROBE", "1", 1);
      unsetenv("CONFLUX_COST_FILE");
      setenv("CONFLUX_COST_SAVE", saved.c_str(), 1);
      cfxComm_t comm;
      if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
      if (rank == 0) {
        const std::string text = readFile(saved);
        const size_t at = text.find("\nextra_message=");
        EXPECT_NE(at, std::string::npos) << text;
        const double extra = at == std::string::npos ? -1 : std::stod(text.substr(at + 15));
        const std::string log = readFile(logs.mine());
        if (n >= 3) {
          // What the probe logged is what the model uses and saves.
          char logged[128];
          std::snprintf(logged, sizeof logged, "each further message of a round %.2f alpha (a fan-out to 2 ranks on other nodes)", extra);
          EXPECT_NE(log.find(logged), std::string::npos) << logged << " in " << log;
        } else {
          EXPECT_DOUBLE_EQ(extra, 0.6) << "two nodes keep the default: " << text;
          EXPECT_NE(log.find("0.60 alpha (not measured: fewer than 2 ranks on other nodes)"), std::string::npos) << log;
        }
      }
      EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
      return 0;
    }, opts);
    EXPECT_TRUE(allSucceeded(out)) << nodes << " nodes";
    std::remove(saved.c_str());
  }
}

// CONFLUX_CHUNK_BYTES sets the pipelining chunk: the cost model costs with it (the saved parameters say
// so) and the hierarchical all-reduces, whose segments are one chunk per local rank, stay correct with many
// segments in flight; auto lets the model choose theirs. A chunk below 4 KiB is refused at init, naming the
// variable.
TEST(Api, ChunkBytesSetsThePipelineChunk) {
  const std::string saved = ::testing::TempDir() + "/conflux-cost-chunk-" + std::to_string(getpid()) + ".txt";
  for (const char* algo : {"allreduce=hier", "allreduce=hier_rhd", "allreduce=hier_dbtree"}) {
    auto out = runRanks(6, [&](int rank, int n, const cfxUniqueId& id) -> int {
      simulateNode(rank / 2);  // 3 nodes of 2: rhd folds, the trees have a leaf that waits
      setenv("CONFLUX_CHUNK_BYTES", "4096", 1);
      setenv("CONFLUX_COST_PROBE", "0", 1);
      unsetenv("CONFLUX_COST_FILE");
      setenv("CONFLUX_COST_SAVE", saved.c_str(), 1);
      setenv("CONFLUX_ALGO", algo, 1);
      cfxComm_t comm;
      if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
      const size_t count = 100003;  // 49 segments of 2 x 4 KiB, the last one short
      std::vector<float> in(count), res(count);
      for (size_t i = 0; i < count; ++i) in[i] = float((i * 7 + size_t(rank) * 3) % 1000);
      for (int call = 0; call < 2; ++call) {
        EXPECT_EQ(cfxAllReduce(in.data(), res.data(), count, cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (int r = 0; r < n; ++r) want += float((i * 7 + size_t(r) * 3) % 1000);
          if (res[i] != want) {
            ADD_FAILURE() << algo << ": element " << i << " is " << res[i] << ", want " << want;
            break;
          }
        }
      }
      EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
      return 0;
    });
    ASSERT_TRUE(allSucceeded(out)) << algo;
    EXPECT_NE(readFile(saved).find("chunk 4096 bytes)"), std::string::npos) << readFile(saved);
    std::remove(saved.c_str());
  }
  // auto: the default chunk, the hierarchical all-reduces' chosen by the model (the saved comment says so).
  auto out = runRanks(4, [&](int rank, int n, const cfxUniqueId& id) -> int {
    simulateNode(rank / 2);
    setenv("CONFLUX_CHUNK_BYTES", "auto", 1);
    setenv("CONFLUX_COST_PROBE", "0", 1);
    unsetenv("CONFLUX_COST_FILE");
    setenv("CONFLUX_COST_SAVE", saved.c_str(), 1);
    setenv("CONFLUX_ALGO", "allreduce=hier_rhd", 1);
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    std::vector<double> in(300001, double(rank + 1)), res(in.size());
    EXPECT_EQ(cfxAllReduce(in.data(), res.data(), in.size(), cfxFloat64, cfxSum, comm, nullptr), cfxSuccess);
    EXPECT_EQ(res.front(), 10.0);
    EXPECT_EQ(res.back(), 10.0);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  ASSERT_TRUE(allSucceeded(out));
  EXPECT_NE(readFile(saved).find("chunk 1048576 bytes, hierarchical all-reduce chunks chosen per call)"), std::string::npos)
      << readFile(saved);
  std::remove(saved.c_str());
  out = runRanks(2, [&](int rank, int n, const cfxUniqueId& id) -> int {
    setenv("CONFLUX_CHUNK_BYTES", "100", 1);
    cfxComm_t comm = nullptr;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxInvalidArgument) return 2;
    const std::string why = cfxGetLastError(nullptr);
    return why.find("CONFLUX_CHUNK_BYTES=100") != std::string::npos ? 0 : 3;
  });
  EXPECT_TRUE(allSucceeded(out));
}

}  // namespace

namespace {

// CONFLUX_RHD_RADIX outside 2..64 fails init on every rank with the variable named.
TEST(Api, AnRhdRadixOutOfRangeIsAnInvalidArgumentNamingIt) {
  for (const char* value : {"1", "65"}) {
    auto out = runRanks(2, [&](int rank, int n, const cfxUniqueId& id) -> int {
      setenv("CONFLUX_RHD_RADIX", value, 1);
      cfxComm_t comm = nullptr;
      if (cfxCommInitRank(&comm, n, id, rank) != cfxInvalidArgument) return 2;
      const std::string why = cfxGetLastError(nullptr);
      return why.find(std::string("CONFLUX_RHD_RADIX=") + value) != std::string::npos ? 0 : 3;
    });
    EXPECT_TRUE(allSucceeded(out)) << value;
  }
}

// CONFLUX_RHD_RADIX=auto: the cost model picks rhd's radix per call. With a cost file whose further
// messages of a round cost nothing, a forced rhd on 5 simulated nodes takes radix 5 (one round each way,
// against radix 2's two and a fold), the explanation names it, and every size is still right.
TEST(Api, AnAutoRhdRadixIsTheModelsChoiceAndStaysCorrect) {
  const InitLogs logs;
  RunOptions opts = logs.options();
  for (auto& [name, value] : opts.env) {
    if (name == "CONFLUX_DEBUG_SUBSYS") value = "INIT,TUNING";
  }
  const std::string costs = ::testing::TempDir() + "/conflux-cost-auto-radix-" + std::to_string(getpid()) + ".txt";
  std::ofstream(costs) << "inter_alpha_us=50\ninter_gbytes_per_s=1\nextra_message=0\n";
  opts.env.push_back({"CONFLUX_RHD_RADIX", "auto"});
  opts.env.push_back({"CONFLUX_COST_FILE", costs});
  opts.env.push_back({"CONFLUX_ALGO", "allreduce=rhd"});
  auto out = runRanks(5, [&](int rank, int n, const cfxUniqueId& id) -> int {
    simulateNode(rank);
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    for (size_t count : {size_t(1), size_t(7), size_t(1000), size_t(65537)}) {
      std::vector<float> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = float(rank + 1) + float(i % 3);
      EXPECT_EQ(cfxAllReduce(v.data(), v.data(), count, cfxFloat32, cfxSum, comm, nullptr), cfxSuccess)
          << cfxGetLastError(comm);
      size_t wrong = 0;
      for (size_t i = 0; i < count; ++i) wrong += v[i] == float(1 + 2 + 3 + 4 + 5 + n * int(i % 3)) ? 0 : 1;
      EXPECT_EQ(wrong, 0u) << count << " elements on rank " << rank;
    }
    if (rank == 0) {
      const std::string log = readFile(logs.mine());
      EXPECT_NE(log.find("rhd, because forced by CONFLUX_ALGO, radix 5 chosen by the cost model"), std::string::npos) << log;
      EXPECT_NE(log.find("(radix 5)"), std::string::npos) << log;
    }
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
  std::remove(costs.c_str());
}

// Settings every rank's plans depend on must agree: a rank with another radix or chunk fails init on every
// rank, naming the variable and both values, instead of leaving them waiting for messages.
TEST(Api, PlanSettingsThatDifferBetweenRanksFailInitOnEveryRank) {
  struct Case {
    const char *variable, *onRank2, *elsewhere;
  };
  for (const Case c : {Case{"CONFLUX_RHD_RADIX", "4", "2"}, Case{"CONFLUX_RHD_RADIX", "auto", "2"},
                       Case{"CONFLUX_CHUNK_BYTES", "auto", "65536"}}) {
    auto out = runRanks(3, [&](int rank, int n, const cfxUniqueId& id) -> int {
      setenv(c.variable, rank == 2 ? c.onRank2 : c.elsewhere, 1);
      cfxComm_t comm = nullptr;
      if (cfxCommInitRank(&comm, n, id, rank) != cfxInvalidArgument) return 2;
      const std::string why = cfxGetLastError(nullptr);
      const std::string want = std::string(c.variable) + " differs between ranks";
      return why.find(want) != std::string::npos && why.find(c.onRank2) != std::string::npos ? 0 : 3;
    });
    EXPECT_TRUE(allSucceeded(out)) << c.variable << "=" << c.onRank2;
  }
}

// CONFLUX_SPIN_US out of range fails init on every rank with the variable named (checked before the
// bootstrap, so no rank is left waiting for the others).
TEST(Api, ASpinTimeOutOfRangeIsAnInvalidArgumentNamingIt) {
  for (const char* value : {"-1", "1000001"}) {
    auto out = runRanks(2, [&](int rank, int n, const cfxUniqueId& id) -> int {
      setenv("CONFLUX_SPIN_US", value, 1);
      cfxComm_t comm = nullptr;
      if (cfxCommInitRank(&comm, n, id, rank) != cfxInvalidArgument) return 2;
      const std::string why = cfxGetLastError(nullptr);
      return why.find(std::string("CONFLUX_SPIN_US=") + value) != std::string::npos ? 0 : 3;
    });
    EXPECT_TRUE(allSucceeded(out)) << value;
  }
}

// Ranks confined to fewer CPUs than there are ranks (here: every rank pinned to one CPU before init, as a
// cpuset or taskset does) count as oversubscribed however many CPUs the machine has, so a waiting rank
// yields instead of polling on the CPU its peer needs; unpinned ranks count the CPUs they may all use
// (and where the test runs under a cgroup CPU quota, the log names it and the quota may decide).
TEST(Api, RanksConfinedToOneCpuCountAsOversubscribed) {
  cpu_set_t parent;
  CPU_ZERO(&parent);
  ASSERT_EQ(sched_getaffinity(0, sizeof parent, &parent), 0);
  int first = 0;
  while (!CPU_ISSET(first, &parent)) ++first;
  const int allowed = CPU_COUNT(&parent);
  for (const bool pin : {true, false}) {
    const InitLogs logs;
    auto out = runRanks(2, [&](int rank, int n, const cfxUniqueId& id) -> int {
      if (pin) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(first, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0) return 4;
      }
      cfxComm_t comm = nullptr;
      if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
      std::vector<int32_t> v(1000, rank + 1);
      bool ok = true;
      for (int i = 0; i < 200 && ok; ++i) {
        ok = cfxAllReduce(v.data(), v.data(), 1, cfxInt32, cfxMax, comm, nullptr) == cfxSuccess && v[0] == 2;
      }
      EXPECT_TRUE(ok) << "rank " << rank;
      EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
      std::ifstream in(logs.mine());
      std::string fit;
      for (std::string line; std::getline(in, line);) {
        if (line.find(" ranks on ") != std::string::npos) fit = line;
      }
      const std::string cpus = "2 ranks on " + std::string(pin ? "1 CPU" : std::to_string(allowed) + (allowed == 1 ? " CPU" : " CPUs"));
      const bool quota = fit.find("cgroup quota") != std::string::npos;
      const bool oversubscribed = fit.find(": oversubscribed") != std::string::npos;
      bool right = fit.find(cpus) != std::string::npos;
      if (pin || allowed < 2) right = right && oversubscribed;
      else if (!quota) right = right && !oversubscribed;
      EXPECT_TRUE(right) << "rank " << rank << (pin ? " pinned" : " unpinned") << ": " << fit;
      return ok && right ? 0 : 3;
    }, logs.options());
    EXPECT_TRUE(allSucceeded(out)) << (pin ? "pinned" : "unpinned");
  }
}

}  // namespace
