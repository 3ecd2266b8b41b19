// All-reduce kernels for ranks on one node whose workspaces are mapped into each other through CUDA IPC
// (transport/cuda_ipc). They read peers' memory directly (NVLink between GPUs, or the same GPU's memory
// when processes share one) and synchronise with flags in device memory: no host involvement, ordered on
// the caller's stream like any kernel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/types.h"

namespace conflux::cuda {

inline constexpr int kIpcMaxRanks = 8;
/// Blocks per launch at most; each block synchronises with the same block of every peer (its own flags).
inline constexpr int kIpcMaxBlocks = 64;
/// Flag words in each rank's flag array: one per (source rank, block).
inline constexpr int kIpcFlagWords = kIpcMaxRanks * kIpcMaxBlocks;

/// Every local rank's workspace as this rank maps it (its own included, at index rank).
struct IpcPeers {
  std::byte* data[kIpcMaxRanks] = {};   ///< 2 * slotBytes each: the halves alternate by call parity
  uint64_t* flags[kIpcMaxRanks] = {};   ///< kIpcFlagWords each: [source rank * kIpcMaxBlocks + block]
};

/// One launch: `count` elements with count * size <= slotBytes. Every rank makes the same launches in
/// the same order with the same `gen` (a per-communicator counter starting at 1), one stream after
/// another (a launch must not start before the rank's previous one finished).
struct IpcAllReduceCall {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DataType type = DataType::Float32;
  RedOp op = RedOp::Sum;  ///< Avg reduces as Sum; the caller divides afterwards. PreMulSum: see premul
  /// PreMulSum: this rank's input is multiplied by its scalar (one value of `type`) as it is copied into
  /// the slot, and the slots are summed. The scalar is read by the kernel from `scalarDevice` (device
  /// memory) when that is not null, else it is the low bytes of `scalarBits`.
  bool premul = false;
  const void* scalarDevice = nullptr;
  uint64_t scalarBits = 0;
  int rank = 0;
  int nranks = 1;
  uint64_t gen = 1;
  size_t slotBytes = 0;
  /// Host-mapped word (device address): set to 1 + the rank waited for when a wait times out; the
  /// kernel then finishes without waiting further (its output is not valid).
  uint32_t* error = nullptr;
  uint64_t timeoutNs = 0;  ///< 0: wait forever
  /// Blocks per launch at most, the same on every rank. Block b of every rank waits for block b of the
  /// others, so where ranks share a GPU all their grids must fit on it at once (IpcWorkspace::maxBlocks).
  int maxBlocks = kIpcMaxBlocks;
  // The other collectives (ipc_collectives.h) only:
  int root = 0;            ///< broadcast and reduce
  size_t sendStride = 0;   ///< elements between rank blocks of send (reduce-scatter, all-to-all)
  size_t recvStride = 0;   ///< elements between rank blocks of recv (all-gather, all-to-all)
};

/// One-shot: each rank copies its input into its workspace, flags every peer, waits for theirs, then
/// reduces all ranks' copies into its output. Latency-optimal (one synchronisation) for small messages.
cudaError_t launchIpcOneShot(const IpcPeers& peers, const IpcAllReduceCall& call, cudaStream_t stream);

/// Two-shot: reduce-scatter (rank r reduces segment r from every workspace) then all-gather (every rank
/// copies segment s from rank s's workspace). Each rank reads 2 * (n-1)/n of the message: for bandwidth.
cudaError_t launchIpcTwoShot(const IpcPeers& peers, const IpcAllReduceCall& call, cudaStream_t stream);

/// The grid every IPC launch uses for `bytes`, at most maxBlocks (identical on every rank for the same
/// call, since every rank passes the same maxBlocks).
int ipcBlocks(size_t bytes, int maxBlocks);

}  // namespace conflux::cuda
