/// @file conflux.h
/// The Conflux C API. It is shaped like NCCL's so that NCCL users feel at home: a unique id made by one
/// rank and shared out of band, communicators initialised by rank, the usual collectives, group calls for
/// batched send/recv, and error codes with a readable per-thread last-error message.
///
/// Host buffers complete before the call returns (the `stream` argument must be NULL for them). Every
/// buffer's memory space is detected per call, so CUDA device buffers slot in without API changes.
///
/// Threads (tests/multiproc/test_threads.cc checks each point, also under ThreadSanitizer):
/// - Different communicators may be used from different threads at the same time, a communicator and its
///   split or shrunk children (which may share network endpoints) included.
/// - Calls on one communicator from several threads are safe: they run one at a time, in the order they
///   take the communicator's lock. Collectives must come in the same order on every rank, so threads that
///   share a communicator must order their calls themselves (as with NCCL).
/// - cfxCommAbort, cfxCommGetAsyncError, cfxCommCount, cfxCommUserRank and cfxCommLocalRank may be called
///   from any thread at any time while the communicator exists, also while another thread is blocked in a
///   call on it (cfxCommAbort then makes that call return).
/// - cfxCommDestroy is the last call on a communicator: no other thread may be in, or about to make, a
///   call on it.
/// - A group (cfxGroupStart .. cfxGroupEnd) collects the calls of the thread that started it only, and
///   the last error (cfxGetLastError) is per thread.
/// - cfxGetUniqueId, cfxCommInitRank and the other calls that make communicators may run on several
///   threads at once (for different communicators).
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

/// Reduction operations. Values 0..4 match ncclRedOp_t. float16 and bfloat16 accumulate in float32 and
/// round to nearest even; integer avg is the truncated quotient of the (wrapping) sum. The bitwise ops
/// apply to integer datatypes only (cfxInvalidArgument otherwise). Values from cfxNumOps up are
/// pre-multiplied sums made by cfxRedOpCreatePreMulSum, valid on the communicator that made them.
typedef enum {
  cfxSum = 0,
  cfxProd = 1,
  cfxMax = 2,
  cfxMin = 3,
  cfxAvg = 4,
  cfxBand = 5,  ///< bitwise and (integer types)
  cfxBor = 6,   ///< bitwise or (integer types)
  cfxBxor = 7,  ///< bitwise exclusive or (integer types)
  cfxNumOps = 8,
  cfxMaxRedOp = 0x7fffffff  ///< keeps the enum 32 bits wide for the values of pre-multiplied sums
} cfxRedOp_t;

/// Where the scalar of a pre-multiplied sum lives (values match ncclScalarResidence_t).
typedef enum {
  /// The scalar pointer is read when each call runs: host memory for calls on host buffers, device
  /// memory of the buffers' GPU for calls on device buffers (read by the kernel, in stream order).
  cfxScalarDevice = 0,
  /// The value is copied when the op is created; the pointer may be reused at once.
  cfxScalarHostImmediate = 1
} cfxScalarResidence_t;

/// Size of the opaque unique id, as NCCL's.
#define CFX_UNIQUE_ID_BYTES 128

/// Identifies one communicator before it exists: the root's rendezvous address and a per-job secret.
/// Treat it as a secret: anyone holding it may join the job.
typedef struct {
  char internal[CFX_UNIQUE_ID_BYTES];
} cfxUniqueId;

/// Opaque communicator handle.
typedef struct cfxComm* cfxComm_t;

/// "Not set" for the integer fields of cfxConfig_t: the environment's value (or the default) applies.
#define CFX_CONFIG_UNDEF_INT (-2147483647 - 1)

/// Per-communicator settings for cfxCommInitRankConfig, cfxCommSplit and cfxCommShrink. Start from
/// CFX_CONFIG_INITIALIZER and set only what you need; unset fields take the CONFLUX_* environment
/// variables (docs/environment.md) or their defaults.
typedef struct {
  size_t size;           ///< sizeof(cfxConfig_t), set by CFX_CONFIG_INITIALIZER
  unsigned int magic;    ///< set by CFX_CONFIG_INITIALIZER
  unsigned int version;  ///< CFX_VERSION_CODE of the header, set by CFX_CONFIG_INITIALIZER
  /// Milliseconds a rank waits for a stuck peer (or for the other ranks at init) before the call fails
  /// with cfxTimeout; CFX_CONFIG_UNDEF_INT: CONFLUX_TIMEOUT_MS. Must be >= 1 when set.
  int timeoutMs;
  /// A name for the communicator, shown in its log lines and error messages (at most 63 characters
  /// are kept); NULL: none. The string is copied.
  const char* commName;
  /// cfxCommSplit, cfxCommCreateGroup and cfxCommShrink only: 1 (the default) lets a child that spans nodes share the parent's resources: it
  /// sends through the parent's network endpoints (no new endpoint, no address exchange) and takes the
  /// parent's measured network costs. 0 opens endpoints of its own and measures afresh.
  /// CFX_CONFIG_UNDEF_INT: 1.
  int splitShare;
} cfxConfig_t;

/// The magic number CFX_CONFIG_INITIALIZER stores in cfxConfig_t::magic.
#define CFX_CONFIG_MAGIC 0xcf1c0f19u

/// Initialiser of cfxConfig_t: every setting unset.
#define CFX_CONFIG_INITIALIZER \
  { sizeof(cfxConfig_t), CFX_CONFIG_MAGIC, CFX_VERSION_CODE, CFX_CONFIG_UNDEF_INT, NULL, CFX_CONFIG_UNDEF_INT }

/// The color that makes cfxCommSplit return no communicator (NULL) to the caller.
#define CFX_SPLIT_NOCOLOR (-1)

/// Stream handle: a cudaStream_t for device buffers, NULL for host buffers.
typedef void* cfxStream_t;

/// Returns the library version code (CFX_VERSION_CODE of the built library).
CFX_API cfxResult_t cfxGetVersion(int* version);

/// Optional parts of this build of the library, as bits of cfxGetFeatures.
#define CFX_FEATURE_CUDA 1u  ///< device buffers (CUDA) are accepted
#define CFX_FEATURE_OFI 2u   ///< ranks may span nodes (libfabric transport)

/// The CFX_FEATURE_* bits of this build.
CFX_API cfxResult_t cfxGetFeatures(unsigned int* features);

/// Creates a unique id and starts the rendezvous store in the calling process; call it on one rank and
/// send the id to the others (MPI_Bcast, a file, ...). The store lives until every communicator created
/// from the id is destroyed in this process (or the process exits).
CFX_API cfxResult_t cfxGetUniqueId(cfxUniqueId* uniqueId);

/// cfxGetUniqueId for ranks that may run on several nodes (@p spansNodes != 0): the store listens on
/// CONFLUX_SOCKET_IFNAME's interface, else on the first interface that is not loopback, so that the
/// other nodes reach it. cfxGetUniqueId listens on loopback unless CONFLUX_SOCKET_IFNAME is set;
/// @p spansNodes == 0 behaves like it.
CFX_API cfxResult_t cfxGetUniqueIdForNodes(cfxUniqueId* uniqueId, int spansNodes);

/// Creates a communicator of @p nranks ranks, this process being @p rank. Collective over all ranks:
/// blocks until every rank has joined or CONFLUX_TIMEOUT_MS passes.
CFX_API cfxResult_t cfxCommInitRank(cfxComm_t* comm, int nranks, cfxUniqueId commId, int rank);

/// cfxCommInitRank with per-communicator settings: @p config (may be NULL: all defaults) must come from
/// CFX_CONFIG_INITIALIZER; a bad field fails with cfxInvalidArgument naming it.
CFX_API cfxResult_t cfxCommInitRankConfig(cfxComm_t* comm, int nranks, cfxUniqueId commId, int rank,
                                          const cfxConfig_t* config);

/// Splits @p comm, as ncclCommSplit does: collective over every rank of @p comm; ranks passing the same
/// @p color form a new communicator, ranked by @p key (ties by rank in @p comm). A rank passing
/// CFX_SPLIT_NOCOLOR gets *newcomm = NULL. The new communicators meet through @p comm itself (no
/// unique id, launcher or extra port), keep its host identities, and with config->splitShare (the
/// default) its network endpoints and measured network costs: up to 15 live communicators split from
/// one communicator (children of children included) share its endpoints, each in a tag space of its
/// own; a split that finds no space free on every member opens endpoints of its own. @p config may be
/// NULL: the new communicator takes @p comm's timeout and no name. Must not be called inside a group.
CFX_API cfxResult_t cfxCommSplit(cfxComm_t comm, int color, int key, cfxComm_t* newcomm,
                                 const cfxConfig_t* config);

/// Makes a communicator of some ranks of @p comm, as MPI_Comm_create_group does: collective over those
/// ranks only. Each of them passes the same @p nranks ranks of @p comm in @p ranks (distinct, the caller
/// among them), whose order is the new communicator's rank order; the other ranks of @p comm do not call
/// it. The members meet through @p comm: ranks[0] sends the others the new rendezvous point over it, so
/// the members' calls on @p comm must come in the same order on all of them (as any call's must).
/// @p config as in cfxCommSplit (splitShare included). Must not be called inside a group.
CFX_API cfxResult_t cfxCommCreateGroup(cfxComm_t comm, int nranks, const int* ranks, cfxComm_t* newcomm,
                                       const cfxConfig_t* config);

/// Makes a communicator of the ranks of @p comm that are not in @p excludeRanks, to carry on after ranks
/// failed, as ncclCommShrink (NCCL 2.27) and MPI_Comm_shrink (MPI ULFM) do. Collective over the
/// survivors: every rank of @p comm not listed calls it, each with the same @p excludeCount distinct
/// ranks (in any order; @p excludeRanks may be NULL when the count is 0); the excluded ranks do not call
/// it. The survivors keep their order: a survivor's new rank is the number of survivors below it.
///
/// They meet at the lowest survivor's recovery point (a socket each rank bound at init), not over
/// @p comm, so shrinking works when @p comm has failed: a peer died or stopped, a call timed out or was
/// aborted. It blocks until every survivor has called it, or fails after two timeouts (survivors learn of
/// a failure up to a timeout apart), naming the ranks missing; survivors that pass different lists
/// cannot join each other. The new communicator keeps
/// @p comm's host identities and measured network costs and, with config->splitShare (the default),
/// sends through @p comm's network endpoints in a tag space of its own; shared memory among the
/// survivors of each node is set up afresh. @p comm is left as it is (destroy it: cfxCommDestroy is safe
/// after an error). @p config as in cfxCommSplit. Must not be called inside a group.
CFX_API cfxResult_t cfxCommShrink(cfxComm_t comm, const int* excludeRanks, int excludeCount, cfxComm_t* newcomm,
                                  const cfxConfig_t* config);

/// Creates a communicator from the launcher's environment: Open MPI / PMI / PMIx, Slurm, or torchrun-style
/// variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). See docs/environment.md for the order in which
/// sources are tried and how the rendezvous address and secret are found.
CFX_API cfxResult_t cfxCommInitFromEnv(cfxComm_t* comm);

/// Destroys a communicator and frees every resource it holds. Safe after an error or an abort. After a
/// failed call, messages a peer still sends may land in that call's buffers until the communicator's
/// network endpoints close: with its own endpoints, here; when it shares them (a split child, or a parent
/// with live children), when the last communicator sharing them is destroyed. Keep the buffers of a
/// failed call until then (the library keeps its own).
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

/// recvbuff on @p root (nranks * sendcount elements) = concatenation of every rank's sendbuff, in rank
/// order; other ranks' recvbuff is unused (may be NULL). In place on the root when sendbuff == recvbuff +
/// root * sendcount.
CFX_API cfxResult_t cfxGather(const void* sendbuff, void* recvbuff, size_t sendcount, cfxDataType_t datatype,
                              int root, cfxComm_t comm, cfxStream_t stream);

/// Block i (recvcount elements) of @p root's sendbuff (nranks * recvcount elements) lands in rank i's
/// recvbuff; other ranks' sendbuff is unused (may be NULL). In place on the root when recvbuff ==
/// sendbuff + root * recvcount.
CFX_API cfxResult_t cfxScatter(const void* sendbuff, void* recvbuff, size_t recvcount, cfxDataType_t datatype,
                               int root, cfxComm_t comm, cfxStream_t stream);

/// All-to-all with per-peer counts (MPI_Alltoallv): sendcounts[j] elements from sendbuff + sdispls[j]
/// go to rank j, and recvcounts[i] elements from rank i land at recvbuff + rdispls[i] (counts and
/// displacements in elements; each array holds nranks entries). sendcounts[j] on rank i must equal
/// recvcounts[i] on rank j. The receive regions must not overlap each other or the send buffer.
CFX_API cfxResult_t cfxAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                                 void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                                 cfxDataType_t datatype, cfxComm_t comm, cfxStream_t stream);

/// Sends @p count elements to @p peer. Outside a group it blocks until the peer has received them (or the
/// data is buffered); inside a group it is queued until cfxGroupEnd.
CFX_API cfxResult_t cfxSend(const void* sendbuff, size_t count, cfxDataType_t datatype, int peer,
                            cfxComm_t comm, cfxStream_t stream);

/// Receives @p count elements from @p peer. Sizes must match the peer's cfxSend.
CFX_API cfxResult_t cfxRecv(void* recvbuff, size_t count, cfxDataType_t datatype, int peer, cfxComm_t comm,
                            cfxStream_t stream);

/// Creates a pre-multiplied sum on @p comm (as ncclRedOpCreatePreMulSum): a reduction that sums, over
/// ranks, each rank's input multiplied by that rank's @p scalar (one value of @p datatype; ranks may pass
/// different values). The multiplication happens where the input is first read, not in a pass of its
/// own. Use the returned op with @p datatype only, on @p comm only; release it with cfxRedOpDestroy.
/// float16/bfloat16 multiply and add in float32 and round once; integers wrap.
CFX_API cfxResult_t cfxRedOpCreatePreMulSum(cfxRedOp_t* op, void* scalar, cfxDataType_t datatype,
                                            cfxScalarResidence_t residence, cfxComm_t comm);

/// Releases an op made by cfxRedOpCreatePreMulSum on @p comm (calls already made with it are unaffected).
CFX_API cfxResult_t cfxRedOpDestroy(cfxRedOp_t op, cfxComm_t comm);

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
