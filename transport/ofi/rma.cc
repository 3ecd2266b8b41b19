// One-sided writes: exposing memory (RemoteKey), iwrite, posting a write chunk on a rail, and the
// choice of how completed writes become visible before later messages (rma.h, docs/ofi.md).
#include "transport/ofi/rma.h"

#include <rdma/fi_rma.h>

#include "transport/ofi/endpoint.h"
#include "transport/ofi/transport.h"

namespace conflux::ofi {

const char* rmaVisibilityName(RmaVisibility v) {
  switch (v) {
    case RmaVisibility::DeliveryComplete: return "delivery-complete";
    case RmaVisibility::Ordered: return "ordered (FI_ORDER_SAW)";
    case RmaVisibility::None: break;
  }
  return "unavailable";
}

RmaChoice chooseRmaVisibility(const std::string& mode, const std::string& provider, bool rma, bool deliveryComplete,
                              bool orderSaw, int rails) {
  if (mode != "auto" && mode != "delivery" && mode != "order" && mode != "off") {
    throw Error(Code::InvalidArgument,
                "ofi: CONFLUX_OFI_RMA (Options::rma) must be auto, delivery, order or off, not '" + mode + "'");
  }
  const std::string who = "provider '" + provider + "'";
  if (mode == "off") return {RmaVisibility::None, "RMA writes are off (CONFLUX_OFI_RMA=off) on " + who};
  if (!rma) {
    return {RmaVisibility::None, who + " does not offer FI_RMA with FI_WRITE and FI_REMOTE_WRITE: exposeMemory "
                                       "and iwrite are unavailable (use isend/irecv)"};
  }
  if (deliveryComplete && mode != "order") return {RmaVisibility::DeliveryComplete, ""};
  // Ordering holds between one pair of endpoints only: with several rails a notification on one rail
  // could overtake a write on another.
  if (orderSaw && rails == 1 && mode != "delivery") return {RmaVisibility::Ordered, ""};
  const std::string railsNote = " (this transport has " + std::to_string(rails) + " rails; ordering holds within one)";
  if (mode == "delivery") {
    return {RmaVisibility::None, who + " does not accept FI_DELIVERY_COMPLETE, which CONFLUX_OFI_RMA=delivery needs"};
  }
  if (mode == "order") {
    return {RmaVisibility::None, orderSaw ? "CONFLUX_OFI_RMA=order needs one rail" + railsNote
                                          : who + " does not report FI_ORDER_SAW, which CONFLUX_OFI_RMA=order needs"};
  }
  return {RmaVisibility::None,
          who + " offers FI_RMA but neither FI_DELIVERY_COMPLETE nor FI_ORDER_SAW" + (orderSaw ? railsNote : "") +
              ": a completed write could not be ordered before later messages, so iwrite is unavailable"};
}

ssize_t Rail::writeChunk(const detail::Op& op, uint32_t chunk, void* buf, size_t len, void* desc, fi_addr_t addr,
                         Slot* slot) {
  iovec iov{buf, len};
  fi_rma_iov target{};
  target.addr = op.remoteAddr[cfg_.index] + op.chunkOffset(chunk);
  target.len = len;
  target.key = op.remoteKey[cfg_.index];
  fi_msg_rma msg{};
  msg.msg_iov = &iov;
  msg.desc = &desc;
  msg.iov_count = 1;
  msg.addr = addr;
  msg.rma_iov = &target;
  msg.rma_iov_count = 1;
  msg.context = slot;
  return fi_writemsg(ep_.get(), &msg, cfg_.writeFlags);
}

Status Transport::exposeMemory(void* ptr, size_t bytes, RemoteKey* key) {
  std::lock_guard lock(mutex_);
  const std::string what = "ofi rank " + std::to_string(rank_) + ": exposeMemory";
  if (caps_.rmaWrites == RmaVisibility::None) return Status(Code::InvalidUsage, what + ": " + caps_.rmaUnavailable);
  if (ptr == nullptr || bytes == 0 || key == nullptr) {
    return Status(Code::InvalidArgument, what + " needs a buffer (ptr), bytes > 0 and a key to fill");
  }
  RemoteKey k;
  k.magic = RemoteKey::kMagic;
  k.version = RemoteKey::kVersion;
  k.rails = uint16_t(rails());
  k.owner = rank_;
  k.id = nextExposure_++;
  k.bytes = bytes;
  std::vector<MemoryRegion*> regions;
  for (int r = 0; r < rails(); ++r) {
    Status err;
    MemoryRegion* mr = rails_[size_t(r)]->mrCache().acquire(ptr, bytes, &err);
    if (mr == nullptr) {
      for (size_t i = 0; i < regions.size(); ++i) rails_[i]->mrCache().release(regions[i]);
      return Status(err.code(), what + " of " + std::to_string(bytes) + " bytes on rail " + std::to_string(r) +
                                    ": " + err.message());
    }
    regions.push_back(mr);
    // The registration may be a larger cached one: peers address our start inside it.
    k.rail[r].base = mr->remoteBase + (reinterpret_cast<uintptr_t>(ptr) - reinterpret_cast<uintptr_t>(mr->addr));
    k.rail[r].key = mr->key;
  }
  exposed_.emplace(k.id, std::move(regions));
  *key = k;
  return Status::ok();
}

Status Transport::unexposeMemory(const RemoteKey& key) {
  std::lock_guard lock(mutex_);
  const std::string what = "ofi rank " + std::to_string(rank_) + ": unexposeMemory";
  if (!key.valid() || key.owner != rank_) {
    return Status(Code::InvalidArgument, what + ": the key is not from this rank's exposeMemory");
  }
  auto it = exposed_.find(key.id);
  if (it == exposed_.end()) {
    return Status(Code::InvalidArgument,
                  what + ": exposure " + std::to_string(key.id) + " is not live (unexposed twice?)");
  }
  for (size_t r = 0; r < it->second.size(); ++r) rails_[r]->mrCache().release(it->second[r]);
  exposed_.erase(it);
  return Status::ok();
}

namespace {

/// Why a write cannot start (without the "ofi rank R: write to rank P (...)" prefix), or Ok.
Status checkWrite(const Capabilities& caps, int nranks, int rails, int peer, const void* src, size_t bytes,
                  const RemoteKey& dst, size_t dstOffset) {
  if (caps.rmaWrites == RmaVisibility::None) return Status(Code::InvalidUsage, caps.rmaUnavailable);
  if (peer < 0 || peer >= nranks) {
    return Status(Code::InvalidArgument, "peer is out of range (0.." + std::to_string(nranks - 1) + ")");
  }
  if (src == nullptr && bytes > 0) return Status(Code::InvalidArgument, "src is null");
  if (!dst.valid()) return Status(Code::InvalidArgument, "dst is not a RemoteKey filled in by exposeMemory");
  if (dst.owner != peer) {
    return Status(Code::InvalidArgument, "dst was exposed by rank " + std::to_string(dst.owner) + ", not by the peer");
  }
  if (dst.rails != rails) {
    return Status(Code::InvalidUsage, "dst covers " + std::to_string(dst.rails) + " rails, this rank has " +
                                          std::to_string(rails) + " (all ranks need the same CONFLUX_OFI_RAILS)");
  }
  if (dstOffset > dst.bytes || bytes > dst.bytes - dstOffset) {
    return Status(Code::InvalidArgument, "dstOffset (" + std::to_string(dstOffset) + ") + bytes (" +
                                             std::to_string(bytes) + ") exceeds the " + std::to_string(dst.bytes) +
                                             " bytes rank " + std::to_string(peer) + " exposed (dst)");
  }
  return Status::ok();
}

}  // namespace

Request Transport::iwrite(int peer, const void* src, size_t bytes, const RemoteKey& dst, size_t dstOffset) {
  std::lock_guard lock(mutex_);
  auto op = std::make_shared<detail::Op>();
  op->send = true;
  op->write = true;
  op->peer = peer;
  op->buf = static_cast<uint8_t*>(const_cast<void*>(src));
  op->bytes = bytes;
  op->dstOffset = dstOffset;
  op->start = Clock::now();
  if (Status bad = checkWrite(caps_, nranks_, rails(), peer, src, bytes, dst, dstOffset); !bad.isOk()) {
    op->fail(Status(bad.code(), describeOp(*op, rank_) + ": " + bad.message()));
    return Request(std::move(op));
  }
  if (bytes == 0) {  // nothing to place: no provider call at all
    op->finish();
    return Request(std::move(op));
  }
  for (int r = 0; r < rails(); ++r) {
    op->remoteAddr[r] = dst.rail[r].base + dstOffset;
    op->remoteKey[r] = dst.rail[r].key;
  }
  // Writes need no agreement with the target on striping: rotate the rail of the first chunk so that
  // single-chunk writes spread over the rails.
  submit(op, rails() > 1 ? writes_++ % uint32_t(rails()) : 0);
  return Request(std::move(op));
}

}  // namespace conflux::ofi
