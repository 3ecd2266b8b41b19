// Launcher environment detection (every source, invalid values), rendezvous by address and by file with
// threads as ranks, host identity, local layout and the per-peer choice (local or network).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/bootstrap/bootstrap.h"
#include "core/bootstrap/launcher_env.h"
#include "core/bootstrap/store_client.h"
#include "core/bootstrap/store_server.h"
#include "core/error.h"
#include "core/host_id.h"
#include "core/transport_select.h"
#include "test_bootstrap_util.h"

using namespace cfxtest;

namespace {

LauncherInfo detect(const FakeEnv& env) {
  auto info = detectLauncher(env.lookup());
  EXPECT_TRUE(info.has_value());
  return info.value_or(LauncherInfo{});
}

std::string errorOf(const FakeEnv& env) {
  try {
    detectLauncher(env.lookup());
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    return e.what();
  }
  return "no error";
}

// Every rank resolves, connects and all-gathers its rank; returns per-rank errors.
std::vector<std::string> joinAll(int n, const std::function<FakeEnv(int)>& envFor, std::chrono::milliseconds timeout,
                                 std::vector<EnvBootstrap>* results = nullptr) {
  std::vector<EnvBootstrap> local(static_cast<size_t>(n));
  auto errors = runRanks(n, [&](int rank) {
    FakeEnv env = envFor(rank);
    EnvBootstrap eb = resolveFromEnvironment(env.lookup(), timeout);
    if (eb.rank != rank || eb.nranks != n) throw std::runtime_error("wrong rank/size");
    if ((rank == 0) != (eb.server != nullptr)) throw std::runtime_error("server on the wrong rank");
    Bootstrap b(std::make_unique<StoreClient>(eb.id, timeout), eb.rank, eb.nranks, "env");
    auto all = b.allGather({static_cast<uint8_t>(rank)});
    for (int r = 0; r < n; ++r) {
      if (all[static_cast<size_t>(r)] != r) throw std::runtime_error("bad allGather");
    }
    b.barrier();  // rank 0 keeps its store until everyone is done
    local[static_cast<size_t>(rank)] = std::move(eb);
  });
  if (results) *results = std::move(local);
  return errors;
}

}  // namespace

TEST(BootstrapEnv, DetectsEachLauncher) {
  LauncherInfo i = detect({{"CONFLUX_RANK", "2"}, {"CONFLUX_NRANKS", "4"}, {"CONFLUX_LOCAL_RANK", "0"},
                           {"CONFLUX_LOCAL_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_EQ(i.source, "CONFLUX");
  EXPECT_EQ(i.rank, 2);
  EXPECT_EQ(i.localSize, 2);

  i = detect({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
              {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"OMPI_MCA_ess_base_jobid", "1234"}, {"PMIX_RANK", "3"},
              {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(i.source, "Open MPI");
  EXPECT_EQ(i.rank, 3);
  EXPECT_EQ(i.size, 8);
  EXPECT_EQ(i.localRank, 1);
  EXPECT_EQ(i.localSize, 2);
  EXPECT_NE(i.jobId.find("OMPI_MCA_ess_base_jobid=1234"), std::string::npos);

  i = detect({{"PMIX_RANK", "5"}, {"PMI_SIZE", "6"}, {"PMIX_NAMESPACE", "ns1"}});
  EXPECT_EQ(i.source, "PMIx");
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.size, 6);
  EXPECT_EQ(i.localRank, -1);
  EXPECT_EQ(i.jobId, "PMIX_NAMESPACE=ns1;");

  // PMIX_RANK without a size falls through to the next source.
  i = detect({{"PMIX_RANK", "1"}, {"PMI_RANK", "1"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "1"},
              {"MPI_LOCALNRANKS", "3"}});
  EXPECT_EQ(i.source, "PMIx");  // PMI_SIZE completes PMIx
  i = detect({{"PMI_RANK", "1"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "3"}});
  EXPECT_EQ(i.source, "PMI");
  EXPECT_EQ(i.localRank, 1);
  EXPECT_EQ(i.localSize, 3);

  i = detect({{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "0"},
              {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_TASKS_PER_NODE", "9"}, {"SLURM_NODEID", "3"},
              {"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "0"}});
  EXPECT_EQ(i.source, "Slurm");
  EXPECT_EQ(i.rank, 6);
  EXPECT_EQ(i.localSize, 1);
  EXPECT_EQ(i.jobId, "SLURM_JOB_ID=77;SLURM_STEP_ID=0;");
  i = detect({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}, {"SLURM_NODEID", "0"}});
  EXPECT_EQ(i.localSize, 2);

  i = detect({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
              {"TORCHELASTIC_RUN_ID", "none"}});
  EXPECT_EQ(i.source, "torchrun");
  EXPECT_EQ(i.localRank, 1);
  EXPECT_EQ(i.jobId, "");

  EXPECT_FALSE(detectLauncher(FakeEnv({{"RANK", "1"}, {"PMI_RANK", ""}}).lookup()).has_value());
}

// Launchers stack: the first source that gives rank and size wins, and what it leaves unsaid about the
// node comes from a later source that agrees on rank and size. The environments are what srun 22.05 set.
TEST(BootstrapEnv, StackedLaunchersFillLocalRanksFromAnAgreeingSource) {
  // srun --mpi=pmi2: PMI's rank and size, Slurm's local rank and tasks per node.
  LauncherInfo i = detect({{"PMI_FD", "13"}, {"PMI_JOBID", "6.0"}, {"PMI_RANK", "1"}, {"PMI_SIZE", "2"},
                           {"SLURM_JOB_ID", "6"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "0"}, {"SLURM_NPROCS", "2"},
                           {"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_STEP_ID", "0"},
                           {"SLURM_STEP_TASKS_PER_NODE", "2"}, {"SLURM_TASKS_PER_NODE", "2"}});
  EXPECT_EQ(i.source, "PMI");
  EXPECT_EQ(i.rank, 1);
  EXPECT_EQ(i.localRank, 1);
  EXPECT_EQ(i.localSize, 2);
  EXPECT_EQ(i.localFrom, "Slurm");
  EXPECT_EQ(i.jobId, "SLURM_JOB_ID=6;SLURM_STEP_ID=0;");

  // srun --mpi=pmix: PMIx gives no size, so Slurm is the source, whole.
  i = detect({{"PMIX_NAMESPACE", "slurm.pmix.5.0"}, {"PMIX_RANK", "1"}, {"SLURM_JOB_ID", "5"}, {"SLURM_LOCALID", "1"},
              {"SLURM_NODEID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_STEP_ID", "0"},
              {"SLURM_STEP_TASKS_PER_NODE", "2"}});
  EXPECT_EQ(i.source, "Slurm");
  EXPECT_EQ(i.localSize, 2);
  EXPECT_EQ(i.localFrom, "");

  // mpiexec inside a Slurm allocation: the allocation's variables describe another launch (8 tasks) and
  // are not used for this one's local ranks.
  i = detect({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"},
              {"SLURM_LOCALID", "0"}, {"SLURM_TASKS_PER_NODE", "8"}, {"SLURM_NODEID", "0"}});
  EXPECT_EQ(i.source, "PMI");
  EXPECT_EQ(i.localRank, -1);
  EXPECT_EQ(i.localSize, -1);
  EXPECT_EQ(i.localFrom, "");

  // A later source that does not parse is not an error for the one that does; the next agreeing one fills.
  i = detect({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"},
              {"SLURM_LOCALID", "x"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"},
              {"LOCAL_WORLD_SIZE", "1"}});
  EXPECT_EQ(i.localRank, 0);
  EXPECT_EQ(i.localSize, 1);
  EXPECT_EQ(i.localFrom, "torchrun");

  // The first source's own local rank stays; only the missing size is filled, and checked against it.
  i = detect({{"PMIX_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
              {"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}, {"SLURM_TASKS_PER_NODE", "2(x2)"},
              {"SLURM_NODEID", "1"}});
  EXPECT_EQ(i.source, "PMIx");
  EXPECT_EQ(i.localRank, 1);
  EXPECT_EQ(i.localSize, 2);
  EXPECT_NE(errorOf({{"PMI_RANK", "1"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "3"}, {"SLURM_PROCID", "1"},
                     {"SLURM_NTASKS", "4"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}, {"SLURM_NODEID", "0"}})
                .find("local rank 3 is out of range [0, 2)"),
            std::string::npos);
}

TEST(BootstrapEnv, InvalidValuesNameTheVariable) {
  EXPECT_NE(errorOf({{"SLURM_PROCID", "abc"}, {"SLURM_NTASKS", "4"}}).find("SLURM_PROCID='abc'"), std::string::npos);
  EXPECT_NE(errorOf({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}})
                .find("OMPI_COMM_WORLD_RANK=4 is out of range [0, 4)"),
            std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "-1"}, {"WORLD_SIZE", "4"}}).find("RANK='-1'"), std::string::npos);
  EXPECT_NE(errorOf({{"PMI_RANK", "0"}, {"PMI_SIZE", "0"}}).find("PMI_SIZE=0"), std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}})
                .find("LOCAL_RANK=2"),
            std::string::npos);
  EXPECT_NE(errorOf({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_TASKS_PER_NODE", "2(x"},
                     {"SLURM_NODEID", "0"}})
                .find("SLURM_TASKS_PER_NODE"),
            std::string::npos);
  EXPECT_NE(errorOf({{"CONFLUX_RANK", "0"}, {"CONFLUX_NRANKS", "99999999999"}}).find("CONFLUX_NRANKS"),
            std::string::npos);

  FakeEnv secret{{"CONFLUX_RANK", "0"}, {"CONFLUX_NRANKS", "2"}, {"CONFLUX_SECRET", "abcd"},
                 {"CONFLUX_BOOTSTRAP_ADDR", "127.0.0.1:1"}};
  try {
    resolveFromEnvironment(secret.lookup(), 100ms);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CONFLUX_SECRET must be 64 hex"), std::string::npos) << e.what();
  }
  for (const char* bad : {"127.0.0.1", "::1:80", "[::1]80", "host:0", "host:70000", ":80"}) {
    FakeEnv addr{{"CONFLUX_RANK", "1"}, {"CONFLUX_NRANKS", "2"}, {"CONFLUX_BOOTSTRAP_ADDR", bad}};
    try {
      resolveFromEnvironment(addr.lookup(), 100ms);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::InvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find("CONFLUX_BOOTSTRAP_ADDR"), std::string::npos) << e.what();
    }
  }
}

TEST(BootstrapEnv, NoLauncherOrNoRendezvousIsAClearError) {
  try {
    resolveFromEnvironment(FakeEnv({}).lookup(), 100ms);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidUsage);
    EXPECT_NE(std::string(e.what()).find("no launcher environment"), std::string::npos);
  }
  try {
    resolveFromEnvironment(FakeEnv({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}).lookup(), 100ms);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidUsage);
    EXPECT_NE(std::string(e.what()).find("CONFLUX_BOOTSTRAP_ADDR"), std::string::npos) << e.what();
  }
  EnvBootstrap single = resolveFromEnvironment(FakeEnv({{"RANK", "0"}, {"WORLD_SIZE", "1"}}).lookup(), 100ms);
  ASSERT_NE(single.server, nullptr);
  StoreClient c(single.id, 1000ms);
  c.set("k", {1});
}

TEST(BootstrapEnv, TorchrunRendezvousUsesMasterPortPlusOne) {
  LogCapture logs;
  uint16_t port = freePort();
  auto errors = joinAll(
      3,
      [&](int r) {
        return FakeEnv{{"RANK", std::to_string(r)}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "127.0.0.1"},
                       {"MASTER_PORT", std::to_string(port - 1)}, {"TORCHELASTIC_RUN_ID", "abc"}};
      },
      5000ms);
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_TRUE(LogCapture::contains("CONFLUX_SECRET is not set"));
}

// The rendezvous order: an address the user or torchrun gave wins over PMIx (and PMIx over the file:
// Launchers/InitFromEnv.*/PmixUnreachable and tests/slurm). Here PMIx's variables are set too, and PMIx is
// never asked.
TEST(BootstrapEnv, AnAddressWinsOverPmix) {
  uint16_t port = freePort();
  std::vector<EnvBootstrap> results;
  auto errors = joinAll(
      2,
      [&](int r) {
        return FakeEnv{{"RANK", std::to_string(r)}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                       {"MASTER_PORT", std::to_string(port - 1)}, {"PMIX_NAMESPACE", "ns"},
                       {"PMIX_RANK", std::to_string(r)}, {"CONFLUX_SECRET", std::string(64, 'b')}};
      },
      5000ms, &results);
  for (const auto& e : errors) EXPECT_EQ(e, "");
  for (const auto& r : results) EXPECT_EQ(r.rendezvous, "MASTER_ADDR");
}

TEST(BootstrapEnv, ExplicitAddressAndSecret) {
  uint16_t port = freePort();
  std::string secret(64, 'a');
  std::vector<EnvBootstrap> results;
  auto errors = joinAll(
      4,
      [&](int r) {
        return FakeEnv{{"PMI_RANK", std::to_string(r)}, {"PMI_SIZE", "4"}, {"CONFLUX_SECRET", secret},
                       {"CONFLUX_BOOTSTRAP_ADDR", "127.0.0.1:" + std::to_string(port)},
                       {"MASTER_ADDR", "10.255.255.1"}, {"MASTER_PORT", "1"}};
      },
      5000ms, &results);
  for (const auto& e : errors) EXPECT_EQ(e, "");
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[1].rendezvous, "CONFLUX_BOOTSTRAP_ADDR");
  EXPECT_EQ(describe(results[1].id), "127.0.0.1:" + std::to_string(port));
  for (uint8_t b : results[2].id.secret) EXPECT_EQ(b, 0xaa);
}

TEST(BootstrapEnv, Ipv6LoopbackAddress) {
  std::shared_ptr<StoreServer> probe;
  try {
    probe = StoreServer::start("::1", 0, testSecret(5));
  } catch (const Error& e) {
    GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
  }
  sockaddr_storage ss = probe->address();
  uint16_t port = ntohs(reinterpret_cast<sockaddr_in6&>(ss).sin6_port);
  probe.reset();  // frees the port for rank 0 of the job below
  std::vector<EnvBootstrap> results;
  auto errors = joinAll(
      2,
      [&](int r) {
        return FakeEnv{{"OMPI_COMM_WORLD_RANK", std::to_string(r)}, {"OMPI_COMM_WORLD_SIZE", "2"},
                       {"CONFLUX_BOOTSTRAP_ADDR", "[::1]:" + std::to_string(port)}, {"CONFLUX_SECRET", std::string(64, '0')}};
      },
      5000ms, &results);
  for (const auto& e : errors) EXPECT_EQ(e, "");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(describe(results[1].id), "[::1]:" + std::to_string(port));
}

TEST(BootstrapEnv, FileRendezvousWithThreadsAsRanks) {
  std::string dir = ::testing::TempDir() + "cfx-rdv-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::string job = std::to_string(getpid()) + "-" + std::to_string(Clock::now().time_since_epoch().count());
  auto envFor = [&](int r) {
    return FakeEnv{{"SLURM_PROCID", std::to_string(r)}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", std::to_string(r)},
                   {"SLURM_STEP_TASKS_PER_NODE", "4"}, {"SLURM_NODEID", "0"}, {"SLURM_JOB_ID", job},
                   {"SLURM_STEP_ID", "0"}, {"TMPDIR", dir}};
  };
  std::vector<EnvBootstrap> results;
  auto errors = joinAll(4, envFor, 5000ms, &results);
  for (const auto& e : errors) EXPECT_EQ(e, "");
  ASSERT_NE(results[0].file, nullptr);
  std::string path = results[0].file->path();
  EXPECT_EQ(path.rfind(dir + "/conflux-", 0), 0u) << path;
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(results[2].rendezvous, "file");
  EXPECT_EQ(results[2].file, nullptr);
  results[0].finish();
  EXPECT_NE(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 0);

  // A rank whose rank 0 never comes times out naming the file.
  try {
    FakeEnv lonely = envFor(1);
    lonely.set("SLURM_JOB_ID", job + "-other");
    resolveFromEnvironment(lonely.lookup(), 200ms);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::Timeout);
    EXPECT_NE(std::string(e.what()).find(dir + "/conflux-"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(BootstrapHostId, HonoursConfluxHostid) {
  setenv("CONFLUX_HOSTID", "node-a", 1);
  EXPECT_EQ(hostIdentity(), "node-a");
  unsetenv("CONFLUX_HOSTID");
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string id = hostIdentity();
  EXPECT_EQ(id.rfind(host, 0), 0u) << id;
  EXPECT_EQ(hostIdentity(), id);
}

TEST(BootstrapHostId, SameHostIsLocalOtherHostIsTheNetwork) {
  using conflux::PeerTransport;
  using conflux::peerTransportName;
  using conflux::selectTransport;
  using conflux::selectTransports;
  EXPECT_EQ(selectTransport("a/boot1", "a/boot1"), PeerTransport::Local);
  EXPECT_EQ(selectTransport("a/boot1", "a/boot2"), PeerTransport::Network);
  EXPECT_STREQ(peerTransportName(PeerTransport::Local), "local");
  EXPECT_STREQ(peerTransportName(PeerTransport::Network), "network");
  std::vector<std::string> hosts = {"n0", "n0", "n1", "n1", "n0"};
  using T = PeerTransport;
  EXPECT_EQ(selectTransports(hosts, 1), (std::vector<T>{T::Local, T::Local, T::Network, T::Network, T::Local}));
  EXPECT_EQ(selectTransports(hosts, 2), (std::vector<T>{T::Network, T::Network, T::Local, T::Local, T::Network}));
  EXPECT_THROW(selectTransports(hosts, 5), Error);
  EXPECT_THROW(selectTransports(hosts, -1), Error);
}

TEST(BootstrapHostId, ComputeLocalLayout) {
  LocalLayout l = computeLocalLayout({"a", "a", "a", "a"}, 2);
  EXPECT_EQ(l.localRank, 2);
  EXPECT_EQ(l.localSize, 4);
  EXPECT_EQ(l.numNodes, 1);
  EXPECT_EQ(l.nodeIndex, 0);

  l = computeLocalLayout({"x", "y", "x", "y", "z"}, 3);  // round-robin placement
  EXPECT_EQ(l.localRanks, (std::vector<int>{1, 3}));
  EXPECT_EQ(l.localRank, 1);
  EXPECT_EQ(l.nodeIndex, 1);
  EXPECT_EQ(l.numNodes, 3);
  l = computeLocalLayout({"x", "y", "x", "y", "z"}, 4);
  EXPECT_EQ(l.localRanks, (std::vector<int>{4}));
  EXPECT_EQ(l.nodeIndex, 2);

  l = computeLocalLayout({"b", "b", "a", "a", "a", "c"}, 4);  // blocks, nodes by first appearance
  EXPECT_EQ(l.nodeIndex, 1);
  EXPECT_EQ(l.localRank, 2);
  EXPECT_EQ(l.localSize, 3);

  l = computeLocalLayout({"solo"}, 0);
  EXPECT_EQ(l.localSize, 1);
  EXPECT_THROW(computeLocalLayout({"a"}, 1), Error);
}

TEST(BootstrapHostId, PickBindHostHonoursSocketIfname) {
  EXPECT_EQ(pickBindHost(true), "127.0.0.1");
  setenv("CONFLUX_SOCKET_IFNAME", "lo", 1);
  EXPECT_EQ(pickBindHost(false), "127.0.0.1");
  setenv("CONFLUX_SOCKET_IFNAME", "no-such-if0", 1);
  EXPECT_THROW(pickBindHost(false), Error);
  unsetenv("CONFLUX_SOCKET_IFNAME");
}
