// transport.h's helpers that every transport's users share.
#include "transport/transport.h"

#include <algorithm>

namespace conflux::transport {

// A wait spins this long before it blocks: waking from poll costs tens of microseconds on some hosts,
// which would otherwise be counted into every round trip the cost probe times.
constexpr auto kSpinBeforePoll = std::chrono::microseconds(50);

Status waitAll(MessageTransport& net, std::span<Request> requests, Deadline until, const std::string& what) {
  const Deadline spinUntil = Clock::now() + kSpinBeforePoll;
  for (;;) {
    net.progress();
    size_t pending = 0;
    for (const Request& r : requests) {
      if (r.failed() && r.done()) return r.status();
      if (!r.done()) ++pending;
    }
    if (pending == 0) return Status::ok();
    const Deadline now = Clock::now();
    if (now >= until) {
      return Status(Code::Timeout, what + ": timed out waiting for " + std::to_string(pending) + " of " +
                                       std::to_string(requests.size()) + " message(s)");
    }
    if (now < spinUntil) continue;
    net.poll(std::min(until, now + std::chrono::milliseconds(10)));
  }
}

}  // namespace conflux::transport
