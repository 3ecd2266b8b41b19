// All-gather, reduce-scatter, all-to-all, broadcast and reduce among the ranks of one node through their
// CUDA-IPC workspaces (the all-reduce is in ipc_allreduce.h, whose workspace, flags and call record
// these share). One launch moves one piece: each rank publishes what its peers need into its slot, the
// ranks exchange one flag per block, and each rank reads (or reduces) from the peers' slots.
#pragma once

#include "kernels/cuda/ipc_allreduce.h"

namespace conflux::cuda {

enum class IpcCollective : uint8_t { AllGather, ReduceScatter, AllToAll, Broadcast, Reduce };

/// Slot elements one launch of `kind` needs per element of call.count.
constexpr int ipcSlotFactor(IpcCollective kind, int nranks) {
  return kind == IpcCollective::ReduceScatter || kind == IpcCollective::AllToAll ? nranks : 1;
}

/// One piece. call.count is the piece's elements per rank block: all-gather's input, reduce-scatter's
/// output, all-to-all's block per peer, the broadcast or reduce message. call.send/recv point at the
/// piece's first element in rank 0's block; sendStride (reduce-scatter, all-to-all) and recvStride
/// (all-gather, all-to-all) are the elements between consecutive rank blocks. Needs count *
/// ipcSlotFactor * size <= slotBytes. call.op must not be Avg (reduce as Sum, then divide).
cudaError_t launchIpcCollective(IpcCollective kind, const IpcPeers& peers, const IpcAllReduceCall& call,
                                cudaStream_t stream);

}  // namespace conflux::cuda
