// conflux-perf: the Backend interface, one implementation per file (backend_conflux.cc, backend_mpi.cc).
// A backend runs one collective call on host buffers with nccl-tests' conventions (in place when the
// buffers are laid out as NCCL's in-place calls are; send/recv goes to rank+1 and comes from rank-1),
// and offers the two helpers the benchmark needs between calls: a barrier and an all-reduce of doubles.
//
// Adding a backend (for example `nccl`, over device buffers): implement this interface in
// backend_nccl.cc, add a make function below and a --backend name in options.cc and launch.cc.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "collectives.h"

namespace cfxperf {

enum class Combine { Sum, Min, Max };

class Backend {
 public:
  virtual ~Backend() = default;
  /// Short name used in the output ("conflux", "mpi").
  virtual const char* name() const = 0;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  /// Whether run() can do this call; when not, *why says why in a few words.
  virtual bool supports(Coll coll, cfxDataType_t type, cfxRedOp_t op, size_t count, std::string* why) const = 0;
  /// Runs one call and returns when it is complete on this rank. `count` is nccl-tests' parameter count
  /// (per-rank block for all-gather, reduce-scatter and all-to-all). `root` is used by broadcast and
  /// reduce. Throws std::runtime_error on failure.
  virtual void run(Coll coll, const void* send, void* recv, size_t count, cfxDataType_t type, cfxRedOp_t op,
                   int root) = 0;
  /// Brackets the calls of one aggregated iteration (-m); no-ops where the backend has no groups.
  virtual void groupStart() {}
  virtual void groupEnd() {}
  /// Registers a buffer for the backend's zero-copy path (-R 1); returns a handle for deregister() or
  /// nullptr where the backend has no registration.
  virtual void* registerBuffer(void*, size_t) { return nullptr; }
  virtual void deregisterBuffer(void*) {}
  virtual void barrier() = 0;
  /// values[i] = combine over ranks of values[i], on every rank.
  virtual void allreduce(double* values, int n, Combine how) = 0;
};

/// The Conflux backend over @p comm, which it owns and destroys.
std::unique_ptr<Backend> makeConfluxBackend(cfxComm_t comm);

/// MPI (backend_mpi.cc in builds with MPI, mpi_unavailable.cc otherwise).
bool mpiAvailable();
/// mpirun that conflux-perf re-executes itself under for `--ranks N` with an MPI backend.
const char* mpiexecPath();
void mpiInit(int* argc, char*** argv);
void mpiFinalize();
[[noreturn]] void mpiAbort(int code);
int mpiRank();
int mpiSize();
/// A Conflux communicator with MPI_COMM_WORLD's ranks (cfxCommInitFromMpi).
cfxResult_t confluxCommFromMpi(cfxComm_t* comm);
std::unique_ptr<Backend> makeMpiBackend();

}  // namespace cfxperf
