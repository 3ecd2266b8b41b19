// conflux-perf: fork, mpirun re-execution and launcher-environment start-up (see launch.h).
// --memory cuda: each rank chooses its GPU (local rank % devices) before its communicators exist; a
// forking parent never touches CUDA (a CUDA context does not survive fork), so the children look for
// devices themselves, and all exit with kExitSkipped when there is none.
#include "launch.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <memory>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "device_memory.h"
#include "json.h"
#include "noise.h"
#include "runner.h"
#include "sysinfo.h"

namespace cfxperf {

namespace {

// Set by the mpirun re-execution so that ranks report the command the user typed.
constexpr const char* kCommandLineVar = "CFXPERF_COMMAND_LINE";

std::string shellJoin(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                   "-_./=:,+@%") == std::string::npos;
    if (!plain) {
      std::string q = "'";
      for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      a = q + "'";
    }
    out += (i ? " " : "") + a;
  }
  return out;
}

void pinIfAsked(const Options& opts, int localRank) {
  if (!opts.pin) return;
  const int core = localRank % onlineCores();
  if (!pinToCore(core)) std::fprintf(stderr, "conflux-perf: warning: could not pin to core %d\n", core);
}

// --memory cuda: the number of CUDA devices, or 0 after saying (when @p announce) that the run is skipped.
int gpusOrSkip(const Options& opts, bool announce) {
  if (opts.memory != Memory::Cuda) return 0;
  std::string why;
  const int count = visibleDeviceCount(&why);
  if (count <= 0 && announce) {
    std::fflush(stdout);
    std::fprintf(stderr, "conflux-perf: skipped: no CUDA device (%s); nothing was measured\n", why.c_str());
  }
  return count > 0 ? count : 0;
}

// The backends of a Conflux-launched run over @p comm: conflux (owning comm) and maybe nccl, or nccl alone.
void addBackends(const Options& opts, cfxComm_t comm, RankSetup& setup) {
  if (opts.backend == "nccl") {
    setup.backends.push_back(makeNcclBackend(comm, false));
    return;
  }
  setup.backends.push_back(makeConfluxBackend(comm));
  if (opts.compare == "nccl") setup.backends.push_back(makeNcclBackend(comm, true));
}

int runGuarded(const Options& opts, RankSetup& setup, int rank) {
  try {
    return runBenchmark(opts, setup);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "conflux-perf: rank %d: %s\n", rank, e.what());
    return 1;
  }
}

// --noise: started by the process that starts the ranks (forked, or mpirun's), just before it does; the
// ranks learn their number from kNoiseEnvVar. They end with this process (noise.h).
std::unique_ptr<NoisyNeighbours> startNoise(const Options& opts) {
  if (opts.noise == 0) return nullptr;
  setenv(kNoiseEnvVar, std::to_string(opts.noise).c_str(), 1);
  return std::make_unique<NoisyNeighbours>(opts.noise);
}

// The child mpirun while the launcher waits for it: the signals that end the launcher end mpirun first.
// A signal the terminal sent (Ctrl-C, si_code SI_KERNEL) already reached mpirun, which is in the same
// foreground process group; forwarding it again would make mpirun abort without stopping its ranks
// in order.
volatile sig_atomic_t gMpirunPid = 0;
void forwardToMpirun(int sig, siginfo_t* info, void*) {
  const int savedErrno = errno;
  if (gMpirunPid > 0 && (info == nullptr || info->si_code != SI_KERNEL)) kill(gMpirunPid, sig);
  errno = savedErrno;
}

// A waited-for child's status as a shell reports it (128 + signal when one ended it).
int exitCodeOf(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// --ranks N with Conflux only: N forked processes.
int runForked(const Options& opts, const std::string& commandLine) {
  return forkRanks(opts.ranks, [&](int r, const std::function<cfxComm_t()>& makeComm) {
    pinIfAsked(opts, r);
    if (opts.memory == Memory::Cuda) {
      const int gpus = gpusOrSkip(opts, r == 0);
      if (gpus == 0) return kExitSkipped;
      selectDevice(r % gpus);
    }
    RankSetup setup;
    addBackends(opts, makeComm(), setup);
    setup.localRank = r;
    setup.launch = "forked by conflux-perf";
    setup.commandLine = commandLine;
    return runGuarded(opts, setup, r);
  });
}

// --ranks N with an MPI backend: become mpirun (with --noise: run it, wait, then stop the noise).
int reexecUnderMpirun(const Options& opts, int argc, char** argv, const std::string& commandLine) {
  if (!mpiAvailable()) {
    std::fprintf(stderr, "conflux-perf: --backend mpi and --compare mpi need a build with MPI "
                         "(CONFLUX_HAVE_MPI); this one has none\n");
    return 2;
  }
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) {
    std::fprintf(stderr, "conflux-perf: --ranks starts its own ranks; under mpirun, leave it out\n");
    return 2;
  }
  char self[PATH_MAX] = {};
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string exe = len > 0 ? std::string(self, static_cast<size_t>(len)) : std::string(argv[0]);
  std::vector<std::string> args = {mpiexecPath(), "--allow-run-as-root", "--oversubscribe", "-np",
                                   std::to_string(opts.ranks), "--bind-to",
                                   opts.pin ? "core:overload-allowed" : "none", "--mca", "btl", "self,vader", exe};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ranks") {
      ++i;
      continue;
    }
    if (a.rfind("--ranks=", 0) == 0) continue;
    args.push_back(a);
  }
  setenv(kCommandLineVar, commandLine.c_str(), 1);
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  std::fflush(stdout);
  // With --noise this process stays, so that it stops its noise processes when mpirun is done.
  const std::unique_ptr<NoisyNeighbours> noise = startNoise(opts);
  const pid_t parent = getpid();
  const pid_t child = noise ? fork() : 0;
  if (child < 0) throw std::runtime_error(std::string("fork for mpirun failed: ") + std::strerror(errno));
  if (child == 0) {
    if (noise) {
      // mpirun ends with the launcher even when that is killed outright (SIGTERM lets it stop its ranks).
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(128 + SIGTERM);
    }
    execvp(cargs[0], cargs.data());
    std::fprintf(stderr, "conflux-perf: cannot run %s: %s\n", cargs[0], std::strerror(errno));
    if (noise) _exit(127);
    return 127;
  }
  gMpirunPid = child;
  struct sigaction forward = {};
  forward.sa_sigaction = forwardToMpirun;
  forward.sa_flags = SA_SIGINFO;
  sigemptyset(&forward.sa_mask);
  const int forwarded[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction before[3] = {};
  for (int k = 0; k < 3; ++k) sigaction(forwarded[k], &forward, &before[k]);
  int status = 0;
  int code = -1;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) {
      code = 1;
      break;
    }
  }
  gMpirunPid = 0;
  for (int k = 0; k < 3; ++k) sigaction(forwarded[k], &before[k], nullptr);
  return code >= 0 ? code : exitCodeOf(status);
}

// No --ranks, MPI backend in use: MPI_COMM_WORLD.
int runUnderMpi(const Options& opts, int argc, char** argv, const std::string& commandLine) {
  mpiInit(&argc, &argv);
  const int rank = mpiRank();
  int code = 1;
  try {
    const int local = launcherLocalRank();
    pinIfAsked(opts, local >= 0 ? local : rank);
    RankSetup setup;
    if (!opts.compare.empty()) {
      cfxComm_t comm = nullptr;
      checkResult(confluxCommFromMpi(&comm), "cfxCommInitFromMpi");
      setup.backends.push_back(makeConfluxBackend(comm));
    }
    setup.backends.push_back(makeMpiBackend());
    setup.localRank = local >= 0 ? local : rank;
    setup.launch = std::getenv(kCommandLineVar) ? "mpirun, started by --ranks" : "MPI";
    setup.commandLine = commandLine;
    code = runBenchmark(opts, setup);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "conflux-perf: rank %d: %s\n", rank, e.what());
    mpiAbort(1);
  }
  mpiFinalize();
  return code;
}

// No --ranks, Conflux only: the launcher's environment, or one rank.
int runFromEnvironment(const Options& opts, const std::string& commandLine) {
  const bool launcher = launcherEnvPresent();
  const int local = launcherLocalRank();
  pinIfAsked(opts, local >= 0 ? local : 0);
  int gpus = 0;
  if (opts.memory == Memory::Cuda) {
    gpus = gpusOrSkip(opts, true);
    if (gpus == 0) return kExitSkipped;
    if (local >= 0 || !launcher) selectDevice((local >= 0 ? local : 0) % gpus);
  }
  cfxComm_t comm = nullptr;
  if (launcher) {
    checkResult(cfxCommInitFromEnv(&comm), "cfxCommInitFromEnv");
  } else {
    cfxUniqueId id;
    checkResult(cfxGetUniqueId(&id), "cfxGetUniqueId");
    checkResult(cfxCommInitRank(&comm, 1, id, 0), "cfxCommInitRank");
  }
  int rank = 0;
  checkResult(cfxCommUserRank(comm, &rank), "cfxCommUserRank");
  int localRank = 0, localSize = 1;
  if (cfxCommLocalRank(comm, &localRank, &localSize) != cfxSuccess) localRank = local >= 0 ? local : rank;
  if (gpus > 0 && launcher && local < 0) selectDevice(localRank % gpus);  // the launcher did not say
  RankSetup setup;
  try {
    addBackends(opts, comm, setup);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "conflux-perf: rank %d: %s\n", rank, e.what());
    return 1;
  }
  setup.localRank = localRank;
  setup.launch = launcher ? "launcher environment" : "single process";
  setup.commandLine = commandLine;
  return runGuarded(opts, setup, rank);
}

}  // namespace

void checkResult(cfxResult_t r, const char* what) {
  if (r != cfxSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + cfxGetErrorString(r) + ": " + cfxGetLastError(nullptr));
  }
}

namespace {

// Whether process `pid` is stopped (SIGSTOP, SIGTSTP, a debugger): /proc/PID/stat's state T or t.
bool isStopped(pid_t pid) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) return false;
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  size_t close = n;  // the last ')': the command name before it may hold one too
  while (close > 0 && buf[close - 1] != ')') --close;
  // "PID (NAME) S ...": the state is two characters after the ')'.
  return close > 0 && close + 1 < n && (buf[close + 1] == 'T' || buf[close + 1] == 't');
}

// How long the other ranks get to fail on their own once one failed: a rank waiting on a dead or stuck
// peer fails within CONFLUX_TIMEOUT_MS, so that and a margin to write its report.
std::chrono::milliseconds survivorsGrace() {
  const char* v = std::getenv("CONFLUX_TIMEOUT_MS");
  long long ms = v != nullptr && *v != '\0' ? std::atoll(v) : 30000;
  if (ms <= 0) ms = 30000;  // no timeout configured: the library's default
  return std::chrono::milliseconds(ms + 5000);
}

// Waits for the ranks (pids[r] is rank r), and only them: the launcher's other children (--noise) are
// left to their owner, so their pids cannot be reaped here and reused before it stops them. Blocks on the
// ranks' pidfds (readable when a process exits); where pidfd_open is unavailable it polls every 5 ms.
//
// Once a rank fails, the others are ended as mpirun ends them, but not before they could say what they
// saw: at once when every rank still running is stopped (it would never notice), else once the
// survivors had their timeout plus 5 s (survivorsGrace) to fail by themselves. Each rank ended so is
// named on stderr, with why. Returns the worst exit code (128 + N for a rank that signal N ended; a
// failure outranks 77, nothing measured, which outranks 0).
int waitForRanks(std::vector<pid_t> pids) {
  std::vector<int> ranks(pids.size());
  for (size_t r = 0; r < ranks.size(); ++r) ranks[r] = static_cast<int>(r);
  std::vector<int> fds;
  for (pid_t p : pids) {
    const int fd = static_cast<int>(syscall(SYS_pidfd_open, p, 0));
    if (fd < 0) {
      for (int f : fds) close(f);
      fds.clear();
      break;
    }
    fds.push_back(fd);
  }
  const bool pidfds = !fds.empty();
  int worst = 0;
  int firstFailed = -1;
  std::chrono::steady_clock::time_point failedAt;
  const auto endRest = [&](const char* why) {
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - failedAt);
    for (size_t i = 0; i < pids.size(); ++i) {
      std::fprintf(stderr, "conflux-perf: ended rank %d (pid %d): %s %lld s after rank %d failed\n", ranks[i],
                   static_cast<int>(pids[i]), why, static_cast<long long>(waited.count()), firstFailed);
      kill(pids[i], SIGKILL);  // our own child, not yet reaped
    }
    std::fflush(stderr);
  };
  bool ended = false;
  while (!pids.empty()) {
    if (pidfds) {
      std::vector<pollfd> ready;
      for (int fd : fds) ready.push_back({fd, POLLIN, 0});
      poll(ready.data(), ready.size(), firstFailed < 0 ? -1 : 100);  // block until the first failure
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (size_t i = 0; i < pids.size();) {
      int status = 0;
      const pid_t done = waitpid(pids[i], &status, WNOHANG);
      if (done == 0 || (done < 0 && errno == EINTR)) {
        ++i;
        continue;
      }
      const int code = done < 0 ? 1 : exitCodeOf(status);
      if (code != 0 && code != kExitSkipped && firstFailed < 0) {
        firstFailed = ranks[i];
        failedAt = std::chrono::steady_clock::now();
      }
      if (worst == 0 || (worst == kExitSkipped && code != 0)) worst = code;
      else if (code != 0 && code != kExitSkipped) worst = std::max(worst, code);
      pids.erase(pids.begin() + static_cast<std::ptrdiff_t>(i));
      ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(i));
      if (pidfds) {
        close(fds[i]);
        fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    if (firstFailed < 0 || ended || pids.empty()) continue;
    if (std::all_of(pids.begin(), pids.end(), isStopped)) {
      endRest("stopped");
      ended = true;
    } else if (std::chrono::steady_clock::now() - failedAt > survivorsGrace()) {
      endRest("still running");
      ended = true;
    }
  }
  return worst;
}

}  // namespace

int forkRanks(int ranks, const RankBody& body) {
  struct Shared {
    std::atomic<int> state;  // 0 waiting, 1 id ready, -1 rank 0 failed
    cfxUniqueId id;
  };
  void* page = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) throw std::runtime_error("mmap of the shared id page failed");
  auto* shared = new (page) Shared();
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid > 0) {
      pids.push_back(pid);
      continue;
    }
    int code = 1;
    try {
      auto makeComm = [&]() {
        if (r == 0) {
          cfxResult_t res = cfxGetUniqueId(&shared->id);
          shared->state.store(res == cfxSuccess ? 1 : -1);
          checkResult(res, "cfxGetUniqueId");
        } else {
          while (shared->state.load() == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
          if (shared->state.load() < 0) throw std::runtime_error("rank 0 could not create the unique id");
        }
        cfxComm_t comm = nullptr;
        checkResult(cfxCommInitRank(&comm, ranks, shared->id, r), "cfxCommInitRank");
        return comm;
      };
      code = body(r, makeComm);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "conflux-perf: rank %d: %s\n", r, e.what());
    }
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(code);
  }
  const int worst = waitForRanks(std::move(pids));
  munmap(page, sizeof(Shared));
  return worst;
}

int launchAndRun(const Options& opts, int argc, char** argv) {
  const char* given = std::getenv(kCommandLineVar);
  const std::string commandLine = given ? given : shellJoin(argc, argv);
  try {
    if (opts.timeoutSec > 0) setenv("CONFLUX_TIMEOUT_MS", std::to_string(opts.timeoutSec * 1000).c_str(), 1);
    // Fail on an unwritable -J before any rank starts (under a launcher, rank 0 checks it instead).
    if (!opts.jsonPath.empty() && opts.ranks > 0) JsonReport probe(opts.jsonPath);
    // The NCCL library is opened before any rank starts, so a missing one is one clear message.
    std::string ncclError;
    if (needsNccl(opts) && !ncclLoad(&ncclError)) {
      std::fprintf(stderr, "conflux-perf: %s\n", ncclError.c_str());
      return 1;
    }
    if (given == nullptr) unsetenv(kNoiseEnvVar);  // a value inherited from elsewhere is not this run's
    if (opts.noise > 0 && opts.ranks == 0 && given == nullptr) {
      std::fprintf(stderr, "conflux-perf: --noise starts its processes beside the ranks of --ranks; under "
                           "another launcher, run the competing load yourself\n");
      return 2;
    }
    if (needsMpi(opts) && opts.ranks > 0) return reexecUnderMpirun(opts, argc, argv, commandLine);
    if (needsMpi(opts)) {
      if (!mpiAvailable()) {
        std::fprintf(stderr, "conflux-perf: --backend mpi and --compare mpi need a build with MPI "
                             "(CONFLUX_HAVE_MPI); this one has none\n");
        return 2;
      }
      return runUnderMpi(opts, argc, argv, commandLine);
    }
    if (opts.ranks > 0) {
      const std::unique_ptr<NoisyNeighbours> noise = startNoise(opts);
      const int code = runForked(opts, commandLine);
      if (code == kExitSkipped && !opts.jsonPath.empty()) std::remove(opts.jsonPath.c_str());  // the empty probe
      return code;
    }
    return runFromEnvironment(opts, commandLine);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "conflux-perf: %s\n", e.what());
    return 1;
  }
}

}  // namespace cfxperf
