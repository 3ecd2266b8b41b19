// conflux-perf: the Backend interface, one implementation per file (backend_conflux.cc, backend_mpi.cc,
// backend_nccl.cc). A backend runs one collective call with nccl-tests' conventions (in place when the
// buffers are laid out as NCCL's in-place calls are; send/recv goes to rank+1 and comes from rank-1),
// on host buffers or, after setMemory(Memory::Cuda, stream), on CUDA device buffers ordered on that
// stream. It offers the helpers the benchmark needs between calls, always on host memory: a barrier, an
// all-reduce of doubles and an all-gather of bytes.
//
// Adding a backend: implement this interface in backend_<name>.cc, add a make function below and a
// --backend name in options.cc and launch.cc.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "collectives.h"
#include "options.h"

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
  /// Where run()'s buffers live; with Memory::Cuda, @p stream (a cudaStream_t) is the stream its calls
  /// are ordered on. Set by the runner before the first run(); host memory and no stream by default.
  void setMemory(Memory memory, void* stream) {
    memory_ = memory;
    stream_ = stream;
  }
  /// The library's version for the header ("2.27.7"), or "" where the backend has none to report.
  virtual std::string version() const { return ""; }
  /// Runs one call. `count` is nccl-tests' parameter count (per-rank block for all-gather,
  /// reduce-scatter and all-to-all). `root` is used by broadcast and reduce. Host memory: returns when
  /// the call is complete on this rank. CUDA memory: enqueues the call on the stream and may return
  /// before it completes (the caller synchronizes the stream). Throws std::runtime_error on failure.
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
  /// all[r * bytes .. (r + 1) * bytes) = rank r's mine, on every rank (host memory).
  virtual void allgather(const void* mine, void* all, size_t bytes) = 0;

 protected:
  Memory memory_ = Memory::Host;
  void* stream_ = nullptr;
};

/// The Conflux backend over @p comm, which it owns and destroys.
std::unique_ptr<Backend> makeConfluxBackend(cfxComm_t comm);

/// The host helpers of a backend, over a Conflux communicator (also used by the nccl backend).
void confluxBarrier(cfxComm_t comm);
void confluxAllreduce(cfxComm_t comm, double* values, int n, Combine how);
void confluxAllgather(cfxComm_t comm, const void* mine, void* all, size_t bytes);

/// NCCL, loaded at run time (backend_nccl.cc in builds with CUDA, cuda_unavailable.cc otherwise).
/// ncclLoad() opens the library (CONFLUX_PERF_NCCL_LIB, else libnccl.so.2 through the loader's search
/// path) and finds its functions once per process; false with *error naming the path and dlerror().
bool ncclLoad(std::string* error);
/// An NCCL communicator with @p comm's ranks (the unique id travels through @p comm), for CUDA device
/// buffers on the current device; its host helpers run over @p comm. Alone (--backend nccl) it owns and
/// destroys @p comm, and fails where NCCL cannot run (two ranks on one GPU). As a @p comparison it
/// borrows @p comm from the Conflux backend, and where NCCL cannot run its supports() says why.
std::unique_ptr<Backend> makeNcclBackend(cfxComm_t comm, bool comparison);

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
