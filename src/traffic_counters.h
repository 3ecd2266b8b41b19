// What a communicator's executor counts of the messages it moves, by peer class: the ranks of its node
// (the local group's byte streams) and the ranks on other nodes (the network). Counted per completed
// round from the plan's send and receive operations, so eager and direct calls (load and store on the
// peers' buffers, no messages) add nothing here; and the time the executor spent blocked waiting on
// peers of each class. Only the call thread writes (src/comm_metrics.h explains the relaxed
// load-and-store); a scrape reads.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace conflux {

struct TrafficCounters {
  enum PeerClass : int { kLocal = 0, kRemote = 1 };
  std::array<std::atomic<uint64_t>, 2> sentBytes{}, sentMessages{}, receivedBytes{}, receivedMessages{};
  std::array<std::atomic<uint64_t>, 2> waitTicks{};

  static void add(std::atomic<uint64_t>& a, uint64_t v) {
    a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
  }
};

}  // namespace conflux
