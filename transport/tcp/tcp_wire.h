// The tcp transport's wire format, in one place for both its sides and the tests that speak it.
#pragma once

#include <cstdint>
#include <cstddef>

namespace conflux::tcp::wire {

/// One rank's listening address, as it travels in the communicator's all-gather.
struct Endpoint {
  char address[64];  ///< IPv4, dotted, NUL-terminated
  uint16_t port;
};

/// What the connecting (lower) rank of a pair sends first.
struct Hello {
  uint32_t magic;
  int32_t rank;
};
/// "CFX2": 2 since progress notices (kProgressBit); a rank of an older build ("CFXT") is refused by name.
constexpr uint32_t kHelloMagic = 0x43465832;
constexpr uint32_t kOlderHelloMagic = 0x43465854;

/// Precedes every message; `bytes` of payload follow.
struct Header {
  uint64_t tag;
  uint64_t bytes;
};

/// A header with this tag bit carries no message but the sender's failure (announceFailure): its text.
constexpr uint64_t kNoticeBit = uint64_t{1} << 63;
constexpr size_t kMaxNoticeBytes = 1024;

/// A header with this tag bit carries no message but the sender's progress (tellProgress): a
/// ProgressNotice. Its bytes count as no activity on the connection (linkActivity).
constexpr uint64_t kProgressBit = uint64_t{1} << 62;
struct ProgressNotice {
  uint64_t seq;    ///< the collective call
  int64_t ageNs;   ///< how long ago the sender last progressed in it
  uint32_t hops;   ///< through how many notices the sender learnt of that progress
  uint32_t unused;
};

}  // namespace conflux::tcp::wire
