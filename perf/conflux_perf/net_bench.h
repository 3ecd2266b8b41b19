// conflux-perf net: the loops that measure one target at one size, run by both ranks together (rank 0
// leads and keeps the time). The same loops measure every target, so their figures compare like for like.
//
//  latency  ping-pong: rank 0 posts its receive, sends, and waits for both; rank 1 waits for the message
//           and sends it back. Half the round trip, per iteration.
//  uni      rank 0 sends a window of messages, rank 1 receives them and answers with a 1-byte ack; rank 0's
//           time runs until the ack arrived. GB/s = window * bytes / time, per iteration.
//  bidir    both ranks post a window of receives and a window of sends and wait for all of them.
//           GB/s counts both directions' bytes.
//  check    before the timed loops: a patterned message each way, compared byte for byte, with the size
//           the target says it moved.
#pragma once

#include <cstddef>
#include <functional>

#include "net_target.h"

namespace cfxperf {

/// Both ranks arrive before either goes on (through the run's communicator).
using Barrier = std::function<void()>;

struct NetLoop {
  int rank = 0;
  size_t bytes = 0;
  int iters = 1;
  int window = 1;  ///< already capped to the target's maxInFlight
  NetBuffers buffers;
  Barrier barrier;
};

/// Seconds per iteration as rank 0 measured it (rank 1 returns 0).
double measureLatency(NetTarget& t, const NetLoop& loop);
double measureUni(NetTarget& t, const NetLoop& loop);
double measureBidir(NetTarget& t, const NetLoop& loop);

/// Bytes that arrived wrong on this rank in the check exchange (0 when all is right).
size_t checkExchange(NetTarget& t, const NetLoop& loop, int seed);

/// Iterations per batch for `bytes` when -n was not given: latency loops move about 8 MiB, bandwidth
/// loops about 128 MiB, within bounds that keep a batch between milliseconds and a second or so.
int autoLatencyIters(size_t bytes);
int autoBandwidthIters(size_t bytes, int window);

}  // namespace cfxperf
