// The NCCL net plugin's metrics: what it moved for NCCL, per physical device, exported through the
// process's metrics service (core/metrics/service.h) when CONFLUX_METRICS_ADDR or CONFLUX_METRICS_FILE
// ask for it, beside the tuner's choices and any Conflux communicator of the same process.
//
// Every series has comm="nccl-net": the plugin serves NCCL's communicators without knowing which
// request belongs to which, so its traffic is one stream per device. Counted where requests finish
// (test), where the provider refuses a post (-FI_EAGAIN: NCCL calls again) and where connections open
// and close. Endpoints of different NCCL contexts on one device run on different threads, so the
// counters are relaxed atomic additions.
#pragma once

#include <atomic>
#include <cstdint>

namespace conflux::plugin {

struct DeviceCounters {
  std::atomic<uint64_t> sentBytes{0}, sentMessages{0}, receivedBytes{0}, receivedMessages{0};
  std::atomic<uint64_t> retries{0};  ///< posts refused with -FI_EAGAIN
  std::atomic<uint64_t> errors{0};   ///< requests that finished with an error
  std::atomic<int64_t> sendComms{0}, recvComms{0};

  static void add(std::atomic<uint64_t>& a, uint64_t v = 1) { a.fetch_add(v, std::memory_order_relaxed); }
};

/// Physical device `dev`'s counters (no-op counters, never exported, for an index out of range).
DeviceCounters& deviceCounters(int dev);

/// Starts the metrics service for the plugin when asked, once per process, and adds the plugin's
/// source. Never throws: a malformed CONFLUX_METRICS_ADDR is a warning (NCCL runs on without metrics).
void startNetMetrics();

}  // namespace conflux::plugin
