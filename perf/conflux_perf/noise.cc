// conflux-perf --noise: see noise.h.
#include "noise.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace cfxperf {

namespace {

[[noreturn]] void spin(pid_t parent) {
  // Ends with the benchmark even if it is killed: the parent's death sends SIGKILL (and a parent that
  // died before the signal was asked for has left already).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(0);
  volatile uint64_t x = 1;
  for (;;) x = x * 6364136223846793005ull + 1442695040888963407ull;
}

}  // namespace

int noiseInEffect() {
  const char* v = std::getenv(kNoiseEnvVar);
  return v != nullptr ? std::atoi(v) : 0;
}

NoisyNeighbours::NoisyNeighbours(int count) {
  const pid_t self = getpid();
  for (int i = 0; i < count; ++i) {
    const pid_t pid = fork();
    if (pid < 0) {
      const int err = errno;
      stop();
      throw std::runtime_error(std::string("--noise: fork failed: ") + std::strerror(err));
    }
    if (pid == 0) spin(self);
    pids_.push_back(pid);
  }
}

NoisyNeighbours::~NoisyNeighbours() { stop(); }

void NoisyNeighbours::stop() {
  for (pid_t pid : pids_) kill(pid, SIGKILL);
  for (pid_t pid : pids_) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pids_.clear();
}

}  // namespace cfxperf
