#include "plugin/net_metrics.h"

#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/log.h"
#include "core/metrics/service.h"
#include "plugin/net_devices.h"

namespace conflux::plugin {
namespace {

// One per physical device, made with the device list and never freed (a scrape may run at exit).
std::vector<DeviceCounters>* counters() {
  static auto* all = new std::vector<DeviceCounters>(devices().size());
  return all;
}

class NetSource final : public metrics::Source {
 public:
  void collect(metrics::Sink& sink) const override {
    const std::vector<Device>& devs = devices();
    const std::vector<DeviceCounters>& all = *counters();
    const auto v = [](const auto& a) { return static_cast<double>(a.load(std::memory_order_relaxed)); };
    double sentBytes = 0, sentMessages = 0, receivedBytes = 0, receivedMessages = 0, retries = 0, errors = 0;
    for (size_t d = 0; d < all.size(); ++d) {
      const DeviceCounters& c = all[d];
      const metrics::Labels nic = {{"comm", "nccl-net"}, {"comm_id", "nccl-net"}, {"rail", std::to_string(d)},
                                   {"nic", devs[d].name}};
      sink.counter(metrics::kNicSentBytes, nic, v(c.sentBytes));
      sink.counter(metrics::kNicReceivedBytes, nic, v(c.receivedBytes));
      for (const char* direction : {"send", "recv"}) {
        metrics::Labels l = {{"nic", devs[d].name}, {"direction", direction}};
        sink.gauge("conflux_nccl_net_connections", "The NCCL net plugin's open connections (send and receive "
                   "comms), by device", l, v(direction[0] == 's' ? c.sendComms : c.recvComms));
      }
      sentBytes += v(c.sentBytes);
      sentMessages += v(c.sentMessages);
      receivedBytes += v(c.receivedBytes);
      receivedMessages += v(c.receivedMessages);
      retries += v(c.retries);
      errors += v(c.errors);
    }
    const metrics::Labels t = {{"comm", "nccl-net"}, {"comm_id", "nccl-net"}, {"transport", "nccl-net"},
                               {"peer", "remote"}};
    // The families and label names of a communicator's (src/comm_metrics.cc): they merge.
    sink.counter(metrics::kTransportSentBytes, t, sentBytes);
    sink.counter(metrics::kTransportSentMessages, t, sentMessages);
    sink.counter(metrics::kTransportReceivedBytes, t, receivedBytes);
    sink.counter(metrics::kTransportReceivedMessages, t, receivedMessages);
    sink.counter(metrics::kTransportRetries, t, retries);
    sink.counter("conflux_transport_errors_total", "Transfers that failed (the NCCL net plugin's requests)", t, errors);
  }
};

}  // namespace

DeviceCounters& deviceCounters(int dev) {
  std::vector<DeviceCounters>& all = *counters();
  static DeviceCounters nowhere;
  return dev >= 0 && size_t(dev) < all.size() ? all[size_t(dev)] : nowhere;
}

void startNetMetrics() {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      if (!metrics::start(metrics::identityFromLauncher())) return;
      counters();  // the device list exists (init found it): size the counters before the first scrape
      metrics::addSource(new NetSource());  // for the life of the process
    } catch (const std::exception& e) {
      CFX_WARN(kInit, "plugin: no metrics: %s", e.what());
    }
  });
}

}  // namespace conflux::plugin
