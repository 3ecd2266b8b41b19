// SPSC byte ring: see channel.h. Memory ordering:
//  - sender: copy bytes, then head.store(release)  ->  receiver: head.load(acquire), then read bytes.
//    The release/acquire pair makes the copied bytes visible before the receiver reads them.
//  - receiver: read bytes, then tail.store(release) ->  sender: tail.load(acquire), then overwrite.
//    This pair orders the receiver's reads before the sender's later overwrite of the same bytes.
//  - after each publish the other side's doorbell is rung (doorbell.h), which is what lets a sleeping
//    peer wake up without a lost wakeup.
#include "transport/shm/channel.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "core/copy_bytes.h"
#include "transport/shm/doorbell.h"

namespace conflux::shm {

ShmSendChannel::ShmSendChannel(ChannelHeader* header, std::byte* ring, uint64_t capacity,
                               DoorbellWords* receiverBell)
    : header_(header),
      ring_(ring),
      capacity_(capacity),
      receiverBell_(receiverBell),
      // Only this side stores head, so relaxed is enough to read our own previous value.
      head_(header->head.load(std::memory_order_relaxed)),
      tailCache_(header->tail.load(std::memory_order_acquire)) {}

size_t ShmSendChannel::writable() const {
  tailCache_ = header_->tail.load(std::memory_order_acquire);
  return static_cast<size_t>(capacity_ - (head_ - tailCache_));
}

template <class Fill>
size_t ShmSendChannel::writeWith(size_t bytes, size_t granule, Fill&& fill) {
  uint64_t space = capacity_ - (head_ - tailCache_);
  if (space < bytes) space = writable();  // refresh the cached tail only when it matters
  size_t n = static_cast<size_t>(std::min<uint64_t>(bytes, space));
  n -= n % granule;  // the ring's size and the publish pieces are multiples of 8, so pieces stay whole
  size_t done = 0;
  while (done < n) {
    const uint64_t offset = head_ % capacity_;
    const size_t piece = static_cast<size_t>(std::min<uint64_t>({n - done, capacity_ - offset, kPublishBytes}));
    fill(ring_ + offset, done, piece);
    done += piece;
    head_ += piece;
    header_->head.store(head_, std::memory_order_release);  // publishes the bytes just copied
    ringDoorbell(*receiverBell_);  // every publish: the receiver may have gone to sleep since the last
  }
  return n;
}

size_t ShmSendChannel::write(const void* src, size_t bytes) {
  const auto* from = static_cast<const std::byte*>(src);
  return writeWith(bytes, 1, [&](std::byte* dst, size_t at, size_t piece) { copyBytes(dst, from + at, piece); });
}

size_t ShmSendChannel::writeTransformed(const void* src, size_t bytes, size_t granule, Transform transform,
                                        const void* ctx) {
  const auto* from = static_cast<const std::byte*>(src);
  return writeWith(bytes, granule,
                   [&](std::byte* dst, size_t at, size_t piece) { transform(dst, from + at, piece, ctx); });
}

ShmRecvChannel::ShmRecvChannel(ChannelHeader* header, const std::byte* ring, uint64_t capacity,
                               DoorbellWords* senderBell)
    : header_(header),
      ring_(ring),
      capacity_(capacity),
      senderBell_(senderBell),
      tail_(header->tail.load(std::memory_order_relaxed)),
      headCache_(header->head.load(std::memory_order_acquire)) {}

std::span<const std::byte> ShmRecvChannel::readable(size_t maxBytes) {
  if (headCache_ - tail_ < maxBytes) headCache_ = header_->head.load(std::memory_order_acquire);
  const uint64_t offset = tail_ % capacity_;
  const uint64_t n = std::min<uint64_t>({headCache_ - tail_, capacity_ - offset, maxBytes});
  if (n == 0) return {};
  return {ring_ + offset, static_cast<size_t>(n)};
}

void ShmRecvChannel::consume(size_t n) {
  assert(n <= headCache_ - tail_ && "consume() beyond what readable() returned");
  if (n == 0) return;
  tail_ += n;
  header_->tail.store(tail_, std::memory_order_release);  // our reads of those bytes are done
  ringDoorbell(*senderBell_);
}

}  // namespace conflux::shm
