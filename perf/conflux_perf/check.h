// conflux-perf: result checking (-c). Inputs are small integers chosen so that every type and op gives an
// exact result (sums stay below 2^8 for bfloat16 up to 42 ranks, products are 2 or 4, averages divide
// evenly), so a reference computed here must match the library bit for bit. Output buffers are
// poisoned (all bytes 0xFF: -1, the unsigned maximum or NaN) before each checked call, so an element the
// library never wrote counts as wrong.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives.h"

namespace cfxperf {

/// Where one call's data lives on this rank, following nccl-tests' buffer layout.
struct CallShape {
  Coll coll = Coll::AllReduce;
  cfxDataType_t type = cfxFloat32;
  cfxRedOp_t op = cfxSum;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  Counts counts;
  bool inPlace = false;
  /// The call's send buffer: sendbuf, or recvbuf + sendInplaceOffset * rank elements when in place.
  char* send(char* sendbuf, char* recvbuf) const;
  /// The call's receive buffer: recvbuf (+ recvInplaceOffset * rank elements when in place).
  char* recv(char* recvbuf) const;
};

/// Writes this rank's inputs for a checked call and poisons the part of recvbuf the result goes to.
void fillInputs(const CallShape& shape, char* sendbuf, char* recvbuf);

/// Counts the elements of this rank's result that differ from the reference (0 on non-root ranks of
/// reduce, whose receive buffer is not written).
int64_t countWrong(const CallShape& shape, const char* recvbuf);

}  // namespace cfxperf
