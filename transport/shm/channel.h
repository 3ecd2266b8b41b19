// Single-producer single-consumer byte ring between two local ranks, living in the receiver's segment.
//
// The sender alone stores `head` (bytes ever written), the receiver alone stores `tail` (bytes ever
// consumed); both are monotonically increasing 64-bit counters, so head - tail is the fill level and
// head % capacity the write position (no wrap-around ambiguity, no "one slot empty" rule). Each side keeps
// a private copy of its own counter and a cached copy of the other side's, refreshed only when the cache
// says it cannot make progress, so the shared lines are touched as little as possible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/shm/layout.h"
#include "transport/shm/shm_world.h"

namespace conflux::shm {

/// Largest amount the sender copies before publishing head, so the receiver can start reading a large
/// write while the rest is still being copied.
inline constexpr size_t kPublishBytes = 64 << 10;

class ShmSendChannel final : public SendChannel {
 public:
  /// `ring` has `capacity` bytes; `receiverBell` is rung whenever new bytes are published.
  ShmSendChannel(ChannelHeader* header, std::byte* ring, uint64_t capacity, DoorbellWords* receiverBell);
  size_t write(const void* src, size_t bytes) override;
  size_t writeTransformed(const void* src, size_t bytes, size_t granule, Transform transform,
                          const void* ctx) override;
  size_t writable() const override;

 private:
  /// Accepts as much of `bytes` as fits (whole granules), filling each ring piece with fill(dst, offset, n).
  template <class Fill>
  size_t writeWith(size_t bytes, size_t granule, Fill&& fill);
  ChannelHeader* header_;
  std::byte* ring_;
  uint64_t capacity_;
  DoorbellWords* receiverBell_;
  uint64_t head_;              ///< Private copy of header_->head (only we store it).
  mutable uint64_t tailCache_; ///< Last tail seen; may lag (then we under-estimate free space).
};

class ShmRecvChannel final : public RecvChannel {
 public:
  /// `senderBell` is rung whenever bytes are consumed (space freed).
  ShmRecvChannel(ChannelHeader* header, const std::byte* ring, uint64_t capacity, DoorbellWords* senderBell);
  std::span<const std::byte> readable(size_t maxBytes) override;
  void consume(size_t n) override;

 private:
  ChannelHeader* header_;
  const std::byte* ring_;
  uint64_t capacity_;
  DoorbellWords* senderBell_;
  uint64_t tail_;       ///< Private copy of header_->tail (only we store it).
  uint64_t headCache_;  ///< Last head seen; may lag (then we under-estimate available data).
};

}  // namespace conflux::shm
