/// @file conflux_mpi.h
/// Creating a Conflux communicator from an MPI communicator (header-only, so libconflux does not depend
/// on MPI): rank 0 of @p mpiComm makes the unique id and broadcasts it. Include after <mpi.h>.
#ifndef CONFLUX_CONFLUX_MPI_H
#define CONFLUX_CONFLUX_MPI_H

#include <mpi.h>

#include "conflux/conflux.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Creates @p comm with the ranks and order of @p mpiComm (collective over @p mpiComm).
/// Returns cfxSystemError when an MPI call fails; the Conflux error otherwise.
static inline cfxResult_t cfxCommInitFromMpi(cfxComm_t* comm, MPI_Comm mpiComm) {
  int rank = 0, size = 0;
  if (MPI_Comm_rank(mpiComm, &rank) != MPI_SUCCESS || MPI_Comm_size(mpiComm, &size) != MPI_SUCCESS) {
    return cfxSystemError;
  }
  cfxUniqueId id;
  int status = cfxSuccess;
  if (rank == 0) status = cfxGetUniqueId(&id);
  /* Everyone learns whether rank 0 succeeded before waiting on an id that will never come. */
  if (MPI_Bcast(&status, 1, MPI_INT, 0, mpiComm) != MPI_SUCCESS) return cfxSystemError;
  if (status != cfxSuccess) return (cfxResult_t)status;
  if (MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mpiComm) != MPI_SUCCESS) return cfxSystemError;
  return cfxCommInitRank(comm, size, id, rank);
}

#ifdef __cplusplus
}
#endif

#endif /* CONFLUX_CONFLUX_MPI_H */
