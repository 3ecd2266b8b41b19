// What the NCCL net plugin's handshake receives from outside the process: the 128-byte listen handle
// NCCL passes connect, and the CONNECT and ACCEPT messages a peer sends (plugin/net_handshake.h). Input:
// byte 0 picks which (and, for messages, how many bytes "arrived"), the rest fills it. Whatever passes
// the check must be safe to use: its rail count and address lengths within their arrays.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "plugin/net_handshake.h"

using namespace conflux::plugin;

namespace {

/// Whether `r` would let a reader past its arrays.
bool unsafe(const RailAddresses& r) {
  if (r.count < 1 || r.count > uint32_t(kMaxRails)) return true;
  for (uint32_t m = 0; m < r.count; ++m) {
    if (r.bytes[m] == 0 || r.bytes[m] > sizeof r.address[m]) return true;
  }
  return false;
}

template <class T>
T fill(const uint8_t* data, size_t size) {
  T value;
  std::memset(&value, 0, sizeof value);
  std::memcpy(&value, data, size < sizeof value ? size : sizeof value);
  return value;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  ++data;
  --size;
  // Most inputs arrive whole; a few are cut short or claim more, as a peer of another layout would.
  const size_t received = (mode & 0x80) != 0 ? size : SIZE_MAX;
  switch (mode % 3) {
    case 0: {
      const auto h = fill<ListenHandle>(data, size);
      if (checkHandle(h).empty() && (h.addressBytes == 0 || h.addressBytes > sizeof h.address)) std::abort();
      break;
    }
    case 1: {
      const auto m = fill<ConnectMessage>(data, size);
      const size_t n = received == SIZE_MAX ? sizeof m : received;
      if (checkConnect(m, n).empty() &&
          (n != sizeof m || m.addressBytes == 0 || m.addressBytes > sizeof m.address || unsafe(m.data))) {
        std::abort();
      }
      break;
    }
    default: {
      const auto m = fill<AcceptMessage>(data, size);
      const size_t n = received == SIZE_MAX ? sizeof m : received;
      if (checkAccept(m, n).empty() && (n != sizeof m || unsafe(m.data))) {
        std::abort();
      }
      break;
    }
  }
  return 0;
}
