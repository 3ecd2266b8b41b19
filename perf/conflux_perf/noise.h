// conflux-perf --noise N: a noisy neighbour. N child processes spin on arithmetic (CPU-bound, no memory
// traffic, not pinned) for as long as the benchmark runs, so the scheduler shares the ranks' cores with
// them, as on a shared machine; the latency tail this causes is what --percentiles shows.
#pragma once

#include <sys/types.h>

#include <vector>

namespace cfxperf {

/// Set by the process that started the noise, to their number: the ranks (its children, or mpirun's) read it
/// to say so in the header and the JSON. The top-level conflux-perf clears any value it inherited.
inline constexpr const char* kNoiseEnvVar = "CFXPERF_NOISE";

/// The number of noise processes this run's ranks share the cores with (kNoiseEnvVar; 0 when unset).
int noiseInEffect();

class NoisyNeighbours {
 public:
  /// Starts `count` spinning processes (none for 0). Throws std::runtime_error when fork fails (the ones
  /// already started are stopped first).
  explicit NoisyNeighbours(int count);
  /// Stops them (SIGKILL, then waits for each).
  ~NoisyNeighbours();
  NoisyNeighbours(const NoisyNeighbours&) = delete;
  NoisyNeighbours& operator=(const NoisyNeighbours&) = delete;

 private:
  void stop();
  std::vector<pid_t> pids_;
};

}  // namespace cfxperf
