// One-sided writes (RMA) of conflux::ofi::Transport: the key a rank hands to the peers that may write
// into its memory, and the choice of how a completed write is made visible before later messages.
//
// Visibility rule: once Transport::iwrite completes at the initiator, a tagged message the initiator
// sends to the target afterwards is not received before the written bytes are visible in the target's
// memory. Two provider features give that:
//   - FI_DELIVERY_COMPLETE on the writes: a write completes only once the target has placed its data,
//     so anything the initiator does afterwards (on any rail) comes later. Costs an acknowledgement from
//     the target per chunk; works with several rails.
//   - FI_ORDER_SAW (send after write) in the endpoint's msg_order: the target processes a send after the
//     writes posted before it on the same endpoint. Free, but only within one endpoint pair: with several
//     rails the notification may overtake a write on another rail, so this needs one rail.
// See docs/ofi.md ("RMA writes").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace conflux::ofi {

/// Most rails (endpoints) a rank may own.
inline constexpr int kMaxRails = 8;

/// How a completed iwrite is made visible before the initiator's later messages.
enum class RmaVisibility : uint8_t {
  None,              ///< iwrite unavailable (Capabilities::rmaUnavailable says why)
  DeliveryComplete,  ///< writes posted with FI_DELIVERY_COMPLETE
  Ordered,           ///< one rail and FI_ORDER_SAW: later sends are processed after earlier writes
};
const char* rmaVisibilityName(RmaVisibility v);

/// What a peer needs to write into memory exposed with Transport::exposeMemory. Plain bytes of fixed
/// size: ship it to the peers by any means (a tagged message, the bootstrap) between processes of the
/// same architecture. Valid until the owner calls unexposeMemory.
struct RemoteKey {
  static constexpr uint32_t kMagic = 0x4b584643;  // "CFXK"
  static constexpr uint16_t kVersion = 1;
  struct PerRail {
    uint64_t base = 0;   ///< what offsets are added to: the address with FI_MR_VIRT_ADDR, else the
                         ///< offset of the exposed start inside its registration
    uint64_t key = 0;    ///< the registration's remote key (fi_mr_key)
  };

  uint32_t magic = 0;
  uint16_t version = 0;
  uint16_t rails = 0;    ///< rails of the owner (the writer must have as many)
  int32_t owner = -1;    ///< rank that exposed the memory
  uint32_t id = 0;       ///< the exposure, for unexposeMemory
  uint64_t bytes = 0;    ///< exposed bytes: writes must stay inside [0, bytes)
  PerRail rail[kMaxRails];

  /// True for a key filled in by exposeMemory (magic and version match).
  bool valid() const { return magic == kMagic && version == kVersion; }
};
static_assert(std::is_trivially_copyable_v<RemoteKey> && std::is_standard_layout_v<RemoteKey>,
              "RemoteKey travels as raw bytes");
static_assert(sizeof(RemoteKey) == 24 + 16 * kMaxRails, "RemoteKey layout is part of the wire format");

/// The outcome of chooseRmaVisibility: a mechanism, or None with the reason.
struct RmaChoice {
  RmaVisibility visibility = RmaVisibility::None;
  std::string unavailable;  ///< why writes are unavailable (empty unless visibility is None)
};

/// Picks the visibility mechanism. `mode` is auto (delivery complete if offered, else ordering with one
/// rail), delivery, order or off (CONFLUX_OFI_RMA). `rma`: the provider granted FI_RMA with FI_WRITE and
/// FI_REMOTE_WRITE; `deliveryComplete`: it accepts FI_DELIVERY_COMPLETE; `orderSaw`: its tx and rx
/// msg_order have FI_ORDER_SAW. Throws Error(InvalidArgument) for an unknown mode.
RmaChoice chooseRmaVisibility(const std::string& mode, const std::string& provider, bool rma, bool deliveryComplete,
                              bool orderSaw, int rails);

}  // namespace conflux::ofi
