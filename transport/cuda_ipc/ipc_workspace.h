// CUDA IPC between the ranks of one node: each rank allocates a device workspace (two message slots and
// a flag array, kernels/cuda/ipc_allreduce.h), exports its IPC handle, and maps every peer's. Works
// between GPUs (peer access over NVLink or PCIe) and between processes sharing one GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/ipc_allreduce.h"

namespace conflux::cuda_ipc {

/// All-gather of equal-sized byte blocks among the ranks sharing the workspace (a host collective).
using AllGather = std::function<Status(const std::vector<uint8_t>& mine, std::vector<uint8_t>& all)>;

class IpcWorkspace {
 public:
  /// Collective over the `nranks` ranks: allocates on `device`, exchanges handles, maps the peers. All
  /// ranks agree on the outcome: when any rank fails, every rank gets an error (naming the first failing
  /// rank and its reason) and nothing stays allocated or mapped.
  static std::unique_ptr<IpcWorkspace> create(int rank, int nranks, int device, size_t slotBytes,
                                              const AllGather& allGather, Status& status);
  ~IpcWorkspace();
  IpcWorkspace(const IpcWorkspace&) = delete;
  IpcWorkspace& operator=(const IpcWorkspace&) = delete;

  const cuda::IpcPeers& peers() const { return peers_; }
  size_t slotBytes() const { return slotBytes_; }
  int device() const { return device_; }
  /// Device address of the timeout word the kernels set (host-mapped memory).
  uint32_t* errorWordDevice() const { return errorDevice_; }
  /// 0 while no kernel timed out, else 1 + the local rank a kernel waited for in vain.
  uint32_t errorWord() const;
  /// Other ranks whose workspace is on this rank's GPU (processes sharing one GPU).
  int gpuSharers() const { return sharers_; }
  /// Blocks per kernel launch at most, the same on every rank (see IpcAllReduceCall::maxBlocks).
  int maxBlocks() const { return maxBlocks_; }
  /// Every rank's workspace is on the same GPU (processes sharing one GPU).
  bool oneGpu() const { return oneGpu_; }

 private:
  IpcWorkspace() = default;
  Status open(int rank, int nranks, const AllGather& allGather);

  int device_ = 0;
  size_t slotBytes_ = 0;
  void* mine_ = nullptr;                // this rank's cudaMalloc
  std::vector<void*> mapped_;           // peers' workspaces, opened through IPC (nullptr for self)
  uint32_t* errorHost_ = nullptr;       // cudaHostAlloc'd, mapped
  uint32_t* errorDevice_ = nullptr;
  cuda::IpcPeers peers_;
  int sharers_ = 0;
  int maxBlocks_ = 1;
  bool oneGpu_ = false;
};

}  // namespace conflux::cuda_ipc
