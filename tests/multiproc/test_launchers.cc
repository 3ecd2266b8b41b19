// cfxCommInitFromEnv on real processes, with each launcher's variables set as that launcher would:
// torchrun (MASTER_ADDR/MASTER_PORT), Open MPI and Slurm (file rendezvous on one node), Slurm with PMIx
// variables but no PMIx server (the file again), CONFLUX_*. (PMIx itself: tests/slurm, srun --mpi=pmix.)
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/multiproc/harness.h"

using namespace conflux::testing;

namespace {

// A port that was free a moment ago (the store binds port + 1 for torchrun, so check that one).
int freePortPair() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    int port = ntohs(a.sin_port);
    close(fd);
    int fd2 = socket(AF_INET, SOCK_STREAM, 0);
    a.sin_port = htons(static_cast<uint16_t>(port + 1));
    bool ok = port < 65000 && bind(fd2, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(fd2);
    if (ok) return port;
  }
  return 29500;
}

using EnvFor = std::vector<std::pair<std::string, std::string>> (*)(int rank, int n, int port, const std::string& job);

int initFromEnvBody(int rank, int n, EnvFor envFor, int port, const std::string& job, const char* expectSource) {
  // Launchers set these before the process starts; the harness's id is not used.
  for (const auto& [k, v] : envFor(rank, n, port, job)) setenv(k.c_str(), v.c_str(), 1);
  setenv("CONFLUX_DEBUG", "INFO", 1);
  setenv("CONFLUX_DEBUG_SUBSYS", "INIT", 1);
  cfxComm_t comm;
  cfxResult_t r = cfxCommInitFromEnv(&comm);
  if (r != cfxSuccess) {
    fprintf(stderr, "rank %d: cfxCommInitFromEnv (%s): %s\n", rank, expectSource, cfxGetLastError(nullptr));
    return 2;
  }
  int got = -1, size = -1;
  cfxCommUserRank(comm, &got);
  cfxCommCount(comm, &size);
  EXPECT_EQ(got, rank);
  EXPECT_EQ(size, n);
  std::vector<int64_t> v(100, rank);
  EXPECT_EQ(cfxAllReduce(v.data(), v.data(), v.size(), cfxInt64, cfxSum, comm, nullptr), cfxSuccess);
  EXPECT_EQ(v[99], static_cast<int64_t>(n * (n - 1) / 2));
  EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
  return 0;
}

struct LauncherCase {
  const char* name;
  EnvFor env;
};

std::vector<std::pair<std::string, std::string>> torchrun(int rank, int n, int port, const std::string& job) {
  return {{"RANK", std::to_string(rank)}, {"WORLD_SIZE", std::to_string(n)}, {"LOCAL_RANK", std::to_string(rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(n)}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)},
          {"TORCHELASTIC_RUN_ID", job}};
}

std::vector<std::pair<std::string, std::string>> openMpi(int rank, int n, int, const std::string& job) {
  return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)}, {"OMPI_COMM_WORLD_SIZE", std::to_string(n)},
          {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank)}, {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(n)},
          {"OMPI_MCA_ess_base_jobid", job}};
}

std::vector<std::pair<std::string, std::string>> slurm(int rank, int n, int, const std::string& job) {
  return {{"SLURM_PROCID", std::to_string(rank)}, {"SLURM_NTASKS", std::to_string(n)},
          {"SLURM_LOCALID", std::to_string(rank)}, {"SLURM_STEP_TASKS_PER_NODE", std::to_string(n)},
          {"SLURM_NODEID", "0"}, {"SLURM_JOB_ID", job}, {"SLURM_STEP_ID", "0"}};
}

// Slurm's variables and PMIx's, but no PMIx server to reach (a stale environment, or a build whose PMIx
// cannot talk to the launcher's): the ranks fall back to the rendezvous file.
std::vector<std::pair<std::string, std::string>> pmixUnreachable(int rank, int n, int port, const std::string& job) {
  auto env = slurm(rank, n, port, job);
  env.push_back({"PMIX_NAMESPACE", "conflux-test-" + job});
  env.push_back({"PMIX_RANK", std::to_string(rank)});
  env.push_back({"PMIX_SERVER_URI4", "pmix-server.1;tcp4://127.0.0.1:1"});
  return env;
}

std::vector<std::pair<std::string, std::string>> confluxVars(int rank, int n, int port, const std::string&) {
  return {{"CONFLUX_RANK", std::to_string(rank)}, {"CONFLUX_NRANKS", std::to_string(n)},
          {"CONFLUX_BOOTSTRAP_ADDR", "127.0.0.1:" + std::to_string(port)},
          {"CONFLUX_SECRET", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}};
}

class InitFromEnv : public ::testing::TestWithParam<LauncherCase> {};

TEST_P(InitFromEnv, EveryRankJoinsWithItsLaunchersRank) {
  const LauncherCase c = GetParam();
  const int port = freePortPair();
  const std::string job = "test-" + std::to_string(getpid()) + "-" + c.name;
  auto out = runRanks(3, [&](int rank, int n, const cfxUniqueId&) {
    return initFromEnvBody(rank, n, c.env, port, job, c.name);
  });
  EXPECT_TRUE(allSucceeded(out));
}

INSTANTIATE_TEST_SUITE_P(Launchers, InitFromEnv,
                         ::testing::Values(LauncherCase{"torchrun", torchrun}, LauncherCase{"OpenMPI", openMpi},
                                           LauncherCase{"Slurm", slurm}, LauncherCase{"PmixUnreachable", pmixUnreachable},
                                           LauncherCase{"Conflux", confluxVars}),
                         [](const auto& p) { return std::string(p.param.name); });

TEST(InitFromEnvErrors, NoLauncherIsAClearError) {
  auto out = runRanks(1, [](int, int, const cfxUniqueId&) -> int {
    for (const char* v : {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID",
                          "CONFLUX_RANK"}) {
      unsetenv(v);
    }
    cfxComm_t comm;
    EXPECT_NE(cfxCommInitFromEnv(&comm), cfxSuccess);
    EXPECT_NE(std::string(cfxGetLastError(nullptr)).find("cfxCommInitFromEnv"), std::string::npos);
    fprintf(stderr, "%s\n", cfxGetLastError(nullptr));
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

}  // namespace
