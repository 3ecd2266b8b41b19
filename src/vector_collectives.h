// Gather, scatter and all-to-all with per-peer counts, as batches of sends and receives (one round in
// which every transfer progresses at once, CommunicatorImpl::runP2p): the library side of what MPI calls
// MPI_Gather, MPI_Scatter and MPI_Alltoallv, so that bindings such as the PyTorch backend stay thin.
// A rank's transfer to itself is a local copy (skipped when source and destination coincide, in place).
#pragma once

#include <cstddef>
#include <vector>

#include "core/error.h"
#include "src/communicator.h"

namespace conflux {

/// One call's arguments as the C API received them (counts and displacements in elements).
struct VectorCall {
  const void* send = nullptr;
  void* recv = nullptr;
  DataType dtype = DataType::Uint8;
  int root = 0;
  uint64_t count = 0;              ///< gather: sendcount; scatter: recvcount
  const size_t* sendCounts = nullptr;  ///< all-to-all-v: nranks entries each
  const size_t* sendDispls = nullptr;
  const size_t* recvCounts = nullptr;
  const size_t* recvDispls = nullptr;
  void* stream = nullptr;
};

/// This rank's sends and receives of a gather to `root`; an error names the bad argument.
Status gatherOps(const VectorCall& c, int rank, int nranks, std::vector<P2pOp>& ops);
/// This rank's sends and receives of a scatter from `root`.
Status scatterOps(const VectorCall& c, int rank, int nranks, std::vector<P2pOp>& ops);
/// This rank's sends and receives of an all-to-all with per-peer counts and displacements.
Status allToAllvOps(const VectorCall& c, int rank, int nranks, std::vector<P2pOp>& ops);

}  // namespace conflux
