// Metric families that more than one source writes (a communicator and the NCCL net plugin): one name
// and one help text each, so that the samples merge into one family whichever source comes first.
#pragma once

namespace conflux::metrics {

struct Family {
  const char* name;
  const char* help;
};

inline constexpr Family kTransportSentBytes{"conflux_transport_sent_bytes_total",
                                            "Bytes sent to peers, by transport and peer class (local: this node's "
                                            "ranks, remote: other nodes)"};
inline constexpr Family kTransportSentMessages{"conflux_transport_sent_messages_total",
                                               "Messages sent to peers, by transport and peer class"};
inline constexpr Family kTransportReceivedBytes{"conflux_transport_received_bytes_total",
                                                "Bytes received from peers, by transport and peer class"};
inline constexpr Family kTransportReceivedMessages{"conflux_transport_received_messages_total",
                                                   "Messages received from peers, by transport and peer class"};
inline constexpr Family kTransportRetries{"conflux_transport_retries_total",
                                          "Posts the network refused for want of room (-FI_EAGAIN), made again later"};
inline constexpr Family kNicSentBytes{"conflux_nic_sent_bytes_total",
                                      "Bytes sent through the NIC, by rail (RMA writes count as sent)"};
inline constexpr Family kNicReceivedBytes{"conflux_nic_received_bytes_total", "Bytes received through the NIC, by rail"};

}  // namespace conflux::metrics
