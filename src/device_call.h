// Collectives and point-to-point batches on CUDA device buffers (builds with CONFLUX_WITH_CUDA only).
//
// Two paths, chosen alike on every rank:
//   - collectives among the ranks of one node (2..8 ranks, CONFLUX_CUDA_IPC=1): CUDA-IPC kernels
//     (kernels/cuda/ipc_allreduce.h: one-shot and two-shot all-reduce; ipc_collectives.h: the others)
//     read the peers' workspaces directly. Fully asynchronous: the call enqueues kernels on the caller's
//     stream and returns.
//   - everything else (point-to-point, ranks on several nodes, hierarchical all-reduce included):
//     staging through pinned host memory. The inputs are copied to the host on the caller's stream, the
//     call waits for that stream, runs the host collective, and enqueues the copies back on the stream.
//     The host is busy for the collective's duration; the results are ordered on the stream.
// libfabric registration of device memory (FI_HMEM) is not used yet: tcp;ofi_rxm has no FI_HMEM, and
// EFA could not be tested here (docs/cuda.md).
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "src/communicator.h"
#include "src/cuda_event.h"
#include "src/device_memory.h"

struct CUstream_st;  // cudaStream_t without the CUDA headers

namespace conflux {

namespace cuda_ipc {
class IpcWorkspace;
}

class DeviceCalls {
 public:
  using HostRun = std::function<Status(const CallArgs&)>;
  using HostP2p = std::function<Status(const std::vector<P2pOp>&)>;
  struct Setup {
    int rank = 0;
    int nranks = 1;
    bool oneNode = true;
    int timeoutMs = 30000;
    /// The communicator's selector (outlives this): picks the CUDA-IPC kernel, or staging when
    /// CONFLUX_ALGO forces a host strategy.
    const Selector* selector = nullptr;
  };
  /// `runHost` and `runP2pHost` run a call on host buffers (the communicator's own path, lock held).
  DeviceCalls(const Setup& setup, HostRun runHost, HostP2p runP2pHost);
  ~DeviceCalls();
  DeviceCalls(const DeviceCalls&) = delete;
  DeviceCalls& operator=(const DeviceCalls&) = delete;

  /// Where a call's two buffers live, looked up once per call (cudaPointerGetAttributes is not free).
  struct Places {
    BufferPlace send, recv;
    bool onDevice() const { return send.space == MemSpace::Cuda || recv.space == MemSpace::Cuda; }
  };
  static Places placesOf(const CallArgs& a);
  /// Whether a point-to-point batch touches CUDA device memory (then it must come here).
  static bool touchesDevice(const std::vector<P2pOp>& ops);

  /// Runs `a`, whose buffers are at `places` (placesOf(a), with onDevice()).
  Status run(const CallArgs& a, const Places& places);
  Status runP2p(const std::vector<P2pOp>& ops);
  /// A CUDA-IPC kernel that timed out waiting for a peer, as an error; Ok otherwise.
  Status asyncError() const;

 private:
  Status runAlone(const CallArgs& a);
  bool ipcEligible(const CallArgs& a, const Places& places, int& device) const;
  Status ensureIpc(int device);
  Status runIpc(const CallArgs& a);
  /// The selector's kernel for a piece of `bytes` of `a` (IPC set up); logs the reason for --explain once
  /// per size on rank 0.
  Algo ipcKernel(const CallArgs& a, size_t bytes);
  Status orderAfterPreviousIpc(CUstream_st* stream);
  Status runStaged(const CallArgs& a, const Places& places);
  /// A staged call: the host-side arguments and the device buffers they mirror (null: not staged).
  struct Staged {
    CallArgs args;
    const void* deviceSend = nullptr;
    void* deviceRecv = nullptr;
  };
  Status runPieces(const Staged& st, uint64_t pieceCount, CUstream_st* stream);
  /// Waits until the copies back from the staging buffer (previous call) are done, then grows it.
  Status stagingFor(size_t bytes);
  Status recordPending(CUstream_st* stream);

  Setup setup_;
  HostRun runHost_;
  HostP2p runP2pHost_;
  bool ipcEnabled_ = true;
  bool ipcTried_ = false;
  size_t ipcSlotBytes_ = 0;
  size_t oneShotBytes_ = 0;
  size_t pieceBytes_ = 0;
  uint64_t gen_ = 0;
  std::unique_ptr<cuda_ipc::IpcWorkspace> ipc_;
  void* staging_ = nullptr;  // pinned host memory
  size_t stagingBytes_ = 0;
  std::vector<CudaEvent> pending_;  // recorded after copies out of the staging buffer
  void* ipcStream_ = nullptr;   // the stream of the last IPC launch
  bool ipcStreamKnown_ = false;
  CudaEvent ipcSwitch_;              // orders a new stream after the previous one
  std::vector<CudaEvent> pieceEvents_;  // mark each piece's copy to the host (reused)
  std::set<std::pair<Collective, size_t>> explained_;  // rank 0 with TUNING logs: IPC sizes explained
};

}  // namespace conflux
