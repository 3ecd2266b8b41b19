/// @file conflux.h
/// The Conflux C API. It is shaped like NCCL's so that NCCL users feel at home: a unique id made by one
/// rank and shared out of band, communicators initialised by rank, the usual collectives, group calls for
/// batched send/recv, and error codes with a readable per-thread last-error message.
///
/// Host buffers complete before the call returns (the `stream` argument must be NULL for them). Every
/// buffer's memory space is detected per call, so CUDA device buffers slot in without API changes.
#ifndef CONFLUX_CONFLUX_H
#define CONFLUX_CONFLUX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CFX_API __attribute__((visibility("default")))
#else
#define CFX_API
#endif

#define CFX_MAJOR 0
#define CFX_MINOR 1
#define CFX_PATCH 0
/// Version as a single integer: major * 10000 + minor * 100 + patch.
#define CFX_VERSION_CODE (CFX_MAJOR * 10000 + CFX_MINOR * 100 + CFX_PATCH)

/// Result of every API call. Values 0..7 match ncclResult_t.
typedef enum {
  cfxSuccess = 0,          ///< The call succeeded.
  cfxUnhandledCudaError = 1,  ///< A CUDA call failed.
  cfxSystemError = 2,      ///< An operating-system call failed (socket, shared memory, ...).
  cfxInternalError = 3,    ///< A bug in Conflux.
  cfxInvalidArgument = 4,  ///< An argument was invalid; the last-error message names it.
  cfxInvalidUsage = 5,     ///< The call sequence was invalid (e.g. ranks disagree on a collective).
  cfxRemoteError = 6,      ///< A peer failed or exited; the message names the peer.
  cfxInProgress = 7,       ///< A non-blocking operation has not finished yet.
  cfxTimeout = 8,          ///< A peer did not answer within CONFLUX_TIMEOUT_MS.
  cfxAborted = 9,          ///< The communicator was aborted.
  cfxNumResults = 10
} cfxResult_t;

/// Element types. Values match ncclDataType_t.
typedef enum {
  cfxInt8 = 0,
  cfxChar = 0,
  cfxUint8 = 1,
  cfxInt32 = 2,
  cfxInt = 2,
  cfxUint32 = 3,
  cfxInt64 = 4,
  cfxUint64 = 5,
  cfxFloat16 = 6,
  cfxHalf = 6,
  cfxFloat32 = 7,
  cfxFloat = 7,
  cfxFloat64 = 8,
  cfxDouble = 8,
  cfxBfloat16 = 9,
  cfxNumTypes = 10
} cfxDataType_t;

/// Reduction operations. Values match ncclRedOp_t. float16 and bfloat16 accumulate in float32 and round
/// to nearest even; integer avg is the truncated quotient of the (wrapping) sum.
typedef enum {
  cfxSum = 0,
  cfxProd = 1,
  cfxMax = 2,
  cfxMin = 3,
  cfxAvg = 4,
  cfxNumOps = 5
} cfxRedOp_t;

/// Size of the opaque unique id, as NCCL's.
#define CFX_UNIQUE_ID_BYTES 128

/// Identifies one communicator before it exists: the root's rendezvous address and a per-job secret.
/// Treat it as a secret: anyone holding it may join the job.
typedef struct {
  char internal[CFX_UNIQUE_ID_BYTES];
} cfxUniqueId;

/// Opaque communicator handle.
typedef struct cfxComm* cfxComm_t;

/// Stream handle: a cudaStream_t for device buffers, NULL for host buffers.
typedef void* cfxStream_t;

/// Returns the library version code (CFX_VERSION_CODE of the built library).
CFX_API cfxResult_t cfxGetVersion(int* version);

/// Creates a unique id and starts the rendezvous store in the calling process; call it on one rank and
/// send the id to the others (MPI_Bcast, a file, ...). The store lives until every communicator created
/// from the id is destroyed in this process (or the process exits).
CFX_API cfxResult_t cfxGetUniqueId(cfxUniqueId* uniqueId);

/// Creates a communicator of @p nranks ranks, this process being @p rank. Collective over all ranks:
/// blocks until every rank has joined or CONFLUX_TIMEOUT_MS passes.
CFX_API cfxResult_t cfxCommInitRank(cfxComm_t* comm, int nranks, cfxUniqueId commId, int rank);

/// Creates a communicator from the launcher's environment: Open MPI / PMI / PMIx, Slurm, or torchrun-style
/// variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). See docs/environment.md for the order in which
/// sources are tried and how the rendezvous address and secret are found.
CFX_API cfxResult_t cfxCommInitFromEnv(cfxComm_t* comm);

/// Destroys a communicator and frees every resource it holds. Safe after an error or an abort.
CFX_API cfxResult_t cfxCommDestroy(cfxComm_t comm);

/// Marks the communicator as aborted: calls blocked in it (in any thread) return cfxAborted, peers see
/// the abort as an error. Call cfxCommDestroy afterwards to free it.
CFX_API cfxResult_t cfxCommAbort(cfxComm_t comm);

/// Returns the asynchronous error state of @p comm: cfxSuccess while healthy, otherwise the error that
/// put it out of service (a peer failure, a timeout, an abort).
CFX_API cfxResult_t cfxCommGetAsyncError(cfxComm_t comm, cfxResult_t* asyncError);

/// Number of ranks in @p comm.
CFX_API cfxResult_t cfxCommCount(const cfxComm_t comm, int* count);

/// Rank of the calling process in @p comm.
CFX_API cfxResult_t cfxCommUserRank(const cfxComm_t comm, int* rank);

/// Ranks on this node and this rank's index among them (ranks ordered by global rank).
CFX_API cfxResult_t cfxCommLocalRank(const cfxComm_t comm, int* localRank, int* localSize);

/// recvbuff[i] = op over ranks of sendbuff[i], on every rank. In place when sendbuff == recvbuff.
CFX_API cfxResult_t cfxAllReduce(const void* sendbuff, void* recvbuff, size_t count, cfxDataType_t datatype,
                                 cfxRedOp_t op, cfxComm_t comm, cfxStream_t stream);

/// recvbuff on @p root = op over ranks of sendbuff; other ranks' recvbuff is untouched (may be NULL).
CFX_API cfxResult_t cfxReduce(const void* sendbuff, void* recvbuff, size_t count, cfxDataType_t datatype,
                              cfxRedOp_t op, int root, cfxComm_t comm, cfxStream_t stream);

/// Copies @p count elements of root's sendbuff into every rank's recvbuff.
CFX_API cfxResult_t cfxBroadcast(const void* sendbuff, void* recvbuff, size_t count, cfxDataType_t datatype,
                                 int root, cfxComm_t comm, cfxStream_t stream);

/// recvbuff (sendcount * nranks elements) = concatenation of every rank's sendbuff, in rank order.
/// In place when sendbuff == recvbuff + rank * sendcount.
CFX_API cfxResult_t cfxAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 cfxDataType_t datatype, cfxComm_t comm, cfxStream_t stream);

/// recvbuff (recvcount elements) = op over ranks of block @p rank of sendbuff (recvcount * nranks
/// elements). In place when recvbuff == sendbuff + rank * recvcount.
CFX_API cfxResult_t cfxReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     cfxDataType_t datatype, cfxRedOp_t op, cfxComm_t comm,
                                     cfxStream_t stream);

/// Block j of sendbuff (count elements each, nranks blocks) goes to rank j, landing as block i of its
/// recvbuff, where i is the sender. In place is not supported: the buffers must not overlap.
CFX_API cfxResult_t cfxAllToAll(const void* sendbuff, void* recvbuff, size_t count, cfxDataType_t datatype,
                                cfxComm_t comm, cfxStream_t stream);

/// Sends @p count elements to @p peer. Outside a group it blocks until the peer has received them (or the
/// data is buffered); inside a group it is queued until cfxGroupEnd.
CFX_API cfxResult_t cfxSend(const void* sendbuff, size_t count, cfxDataType_t datatype, int peer,
                            cfxComm_t comm, cfxStream_t stream);

/// Receives @p count elements from @p peer. Sizes must match the peer's cfxSend.
CFX_API cfxResult_t cfxRecv(void* recvbuff, size_t count, cfxDataType_t datatype, int peer, cfxComm_t comm,
                            cfxStream_t stream);

/// Allocates @p size bytes of host memory that the other ranks on this node can map (like ncclMemAlloc).
/// Collectives whose buffers on every rank come from cfxMemAlloc move every byte once, with no staging
/// copy (the "direct" algorithms); any other buffer works too, through staging. The memory is
/// zero-filled; free it with cfxMemFree. Fails with cfxInvalidArgument for a NULL @p ptr or a size of 0.
CFX_API cfxResult_t cfxMemAlloc(void** ptr, size_t size);

/// Frees memory from cfxMemAlloc (a NULL @p ptr is accepted and ignored). A peer that mapped the block
/// keeps its pages until that peer's communicator drops the mapping.
CFX_API cfxResult_t cfxMemFree(void* ptr);

/// Registers @p buff (@p size bytes) with @p comm and returns a handle for cfxCommDeregister, as
/// ncclCommRegister does. Buffers from cfxMemAlloc are used directly whether registered or not; other
/// memory is accepted (so NCCL-style code runs unchanged) and still moves through staging.
CFX_API cfxResult_t cfxCommRegister(const cfxComm_t comm, void* buff, size_t size, void** handle);

/// Releases a registration made by cfxCommRegister on the same communicator.
CFX_API cfxResult_t cfxCommDeregister(const cfxComm_t comm, void* handle);

/// Starts a group: following calls on this thread are queued and run together at cfxGroupEnd, so that
/// batched send/recv pairs cannot deadlock. Groups nest; the outermost cfxGroupEnd runs them.
CFX_API cfxResult_t cfxGroupStart(void);

/// Ends a group and runs what it queued: collectives in call order, then all send/recv operations of
/// each communicator concurrently.
CFX_API cfxResult_t cfxGroupEnd(void);

/// A static string describing @p result.
CFX_API const char* cfxGetErrorString(cfxResult_t result);

/// The message of the last error on the calling thread (names the argument or peer at fault).
/// @p comm is accepted for NCCL symmetry and may be NULL.
CFX_API const char* cfxGetLastError(cfxComm_t comm);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // CONFLUX_CONFLUX_H
