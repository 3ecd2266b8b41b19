// Eager small collectives among the ranks of one node: one flag per call, no barrier.
#pragma once

#include <cstdint>

#include "src/executor.h"
#include "src/flight_recorder.h"
#include "core/error.h"
#include "core/types.h"
#include "transport/shm/shm_world.h"

namespace conflux {

/// Payload bytes of one eager slot (transport/shm/layout.h): the most a rank can publish per call.
uint64_t eagerCapacity();

/// CONFLUX_EAGER_BYTES=auto: the per-rank input up to which calls among `localRanks` ranks go eager.
/// 64 KiB up to 4 ranks, 32 KiB up to 8, 16 KiB beyond: an eager rank reads every peer's whole input, so
/// the bytes it reads grow with the rank count while a plan's stay near twice the vector.
uint64_t autoEagerBytes(int localRanks);

/// Bytes every rank publishes for this call (the largest over ranks, so every rank computes the same value
/// and takes the same path): the vector for all-reduce, reduce and broadcast, the own block for
/// all-gather, all n blocks for reduce-scatter and all-to-all; 0 for point-to-point (never eager);
/// UINT64_MAX when the product overflows.
uint64_t eagerInputBytes(Collective coll, uint64_t count, uint32_t eltSize, int nranks);

/// One eager call.
struct EagerCall {
  Collective coll = Collective::AllReduce;
  DataType dtype = DataType::Float32;
  RedOp op = RedOp::Sum;
  int root = 0;
  uint64_t count = 0;
  const void* send = nullptr;
  void* recv = nullptr;
  /// PreMulSum: this rank's scalar (host memory); its input is scaled as it is published.
  const void* scalar = nullptr;
  uint64_t eagerSeq = 0;  ///< 1-based count of the communicator's eager calls (picks the slot parity).
  uint64_t callSeq = 0;   ///< 1-based call number on the communicator (messages, argument checks).
  TraceCursor trace;      ///< the flight recorder's entry: notes the peer the call blocks on
};

/// Runs `call` through the eager slots of `world` (the communicator's local group: eager needs its slots
/// in shared memory); every local rank must make the same eager call (all ranks of the communicator share
/// one node). Returns Ok, or an error also posted to every local rank.
Status runEager(const EagerCall& call, shm::ShmWorld& world, const ExecEnv& env, ExecWorkspace& work);

}  // namespace conflux
