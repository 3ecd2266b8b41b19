// Communicator setup from a launcher's environment (cfxCommInitFromEnv): which rank am I, how many are
// we, and where is the rendezvous store.
//
// Rank and size come from the first of these sources that defines both:
//   CONFLUX    CONFLUX_RANK, CONFLUX_NRANKS [, CONFLUX_LOCAL_RANK, CONFLUX_LOCAL_SIZE]
//   Open MPI   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   PMIx       PMIX_RANK with PMI_SIZE or OMPI_COMM_WORLD_SIZE
//   PMI        PMI_RANK, PMI_SIZE [, MPI_LOCALRANKID, MPI_LOCALNRANKS]       (MPICH / Hydra)
//   Slurm      SLURM_PROCID, SLURM_NTASKS [, SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE + SLURM_NODEID]
//   torchrun   RANK, WORLD_SIZE [, LOCAL_RANK, LOCAL_WORLD_SIZE]
// A local rank or size the first source does not give comes from the next source that gives it and
// agrees on rank and size (srun --mpi=pmi2 sets PMI_RANK and PMI_SIZE, and Slurm's variables).
// The store's address, in order:
//   1. CONFLUX_BOOTSTRAP_ADDR = host:port or [v6]:port;
//   2. MASTER_ADDR with port MASTER_PORT + 1 (torchrun's own TCPStore already listens on MASTER_PORT);
//   3. under a PMIx launcher (PMIX_NAMESPACE and PMIX_RANK set, CONFLUX_PMIX not 0, a build with PMIx):
//      rank 0 starts a store with a random secret and PMIx carries the id (pmix_exchange.h); where no PMIx
//      server answers, on to the next mode;
//   4. when every rank is on this node (local size == size): a file rendezvous. Rank 0 starts a store on
//      127.0.0.1 (ephemeral port) and publishes the encoded id atomically (temp file + rename, mode 0600)
//      as $TMPDIR/conflux-<uid>-<job key>.id; the others poll for it. The job key hashes the launcher's job
//      ids (CONFLUX_JOB_ID, OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE, SLURM_JOB_ID + SLURM_STEP_ID,
//      TORCHELASTIC_RUN_ID), so concurrent jobs do not meet. Rank 0 removes the file once every rank
//      has connected (EnvBootstrap::finish). A file left by a crashed run with the same job id could be
//      read before rank 0 replaces it; the ranks would then fail to connect or authenticate and time out
//      (launcher job ids are unique per launch, so only a reused CONFLUX_JOB_ID can cause this).
// In modes 1 and 2 rank 0 starts the store (on that address when it is a loopback address, else on the
// wildcard address of its family). The secret is CONFLUX_SECRET (64 hex characters) when set; without it
// modes 3 and 4 use a random one (only PMIx or the file carries it) and modes 1-2 derive it from the job identifiers,
// which other users of the cluster could guess: a warning says so.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/bootstrap/store_server.h"
#include "core/bootstrap/unique_id.h"

namespace conflux::bootstrap {

/// Reads one environment variable (null or "" = unset). Injected so tests can fake launchers.
using EnvLookup = std::function<const char*(const char*)>;

/// The process environment (getenv).
EnvLookup defaultEnvLookup();

/// What a launcher told this process.
struct LauncherInfo {
  std::string source;   ///< "CONFLUX", "Open MPI", "PMIx", "PMI", "Slurm" or "torchrun"
  int rank = -1;        ///< in [0, size)
  int size = -1;        ///< >= 1
  int localRank = -1;   ///< -1 when the launcher does not say
  int localSize = -1;   ///< -1 when the launcher does not say
  /// The source the local rank or size came from when `source` does not say and a later source that
  /// agrees on rank and size does (srun --mpi=pmi2: PMI's rank and size, Slurm's local ranks); else "".
  std::string localFrom;
  std::string jobId;    ///< "NAME=value;..." of the job identifiers present; empty when none
};

/// Detects the launcher. Returns nullopt when no source defines both rank and size; throws
/// Error(InvalidArgument) naming the variable when a value does not parse or is out of range.
std::optional<LauncherInfo> detectLauncher(const EnvLookup& env);

/// Removes the rendezvous file when destroyed (rank 0 of a file rendezvous only).
class RendezvousFile {
 public:
  explicit RendezvousFile(std::string path) : path_(std::move(path)) {}
  ~RendezvousFile();
  RendezvousFile(const RendezvousFile&) = delete;
  RendezvousFile& operator=(const RendezvousFile&) = delete;
  /// The file's path.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Everything cfxCommInitFromEnv needs to continue as cfxCommInitRank(nranks, id, rank).
struct EnvBootstrap {
  UniqueId id;                          ///< the store to connect to (rank 0 included)
  int rank = -1, nranks = 0;
  int localRank = -1, localSize = -1;   ///< as the launcher said (-1 unknown); informational
  std::shared_ptr<StoreServer> server;  ///< the store, non-null on rank 0
  std::string source;                   ///< launcher source used, for logs
  std::string rendezvous;               ///< how the store was found: "CONFLUX_BOOTSTRAP_ADDR", "MASTER_ADDR", "PMIx", "file"
  std::shared_ptr<RendezvousFile> file; ///< rank 0 of a file rendezvous: removes the file when released

  /// The cleanup hook: removes the rendezvous file (rank 0 of a file rendezvous; no-op elsewhere). Call
  /// it once every rank has connected to the store, e.g. after the communicator's first bootstrap
  /// all-gather (the file is removed anyway when the last copy of this EnvBootstrap is destroyed).
  void finish() { file.reset(); }
};

/// Detects the launcher, finds (rank 0: starts) the store and returns its id. Non-zero ranks of a file
/// rendezvous wait up to @p timeout for rank 0's file. Throws Error(InvalidUsage) when no launcher is
/// found or no rendezvous is possible, Error(InvalidArgument) for malformed variables, Error(Timeout).
EnvBootstrap resolveFromEnvironment(const EnvLookup& env, std::chrono::milliseconds timeout);

}  // namespace conflux::bootstrap
