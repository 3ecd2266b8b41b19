#include "plugin/net_endpoint.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "plugin/net_comm.h"
#include "plugin/net_devices.h"
#include "transport/ofi/cq_drain.h"

namespace conflux::plugin {

void* Registration::desc(int rail) const { return rails[rail] != nullptr ? rails[rail]->desc : nullptr; }

void Request::reset(Kind k, int count) {
  kind = k;
  inUse = true;
  n = count;
  total = count;
  pending.store(0, std::memory_order_relaxed);
  unposted.store(0, std::memory_order_relaxed);
  posted = 0;
  error.store(abi::kSuccess, std::memory_order_relaxed);
  for (int i = 0; i < kMaxRecvs; ++i) {
    ops[i].request = this;
    ops[i].index = i;
    ops[i].ep = nullptr;
    regs[i] = nullptr;
    arrival[i].store(kWaiting, std::memory_order_relaxed);
    stripesPosted[i] = 0;
  }
}

Completion& Request::stripeOp(int buffer, int stripe) {
  if (!stripeOps) stripeOps = std::make_unique<Completion[]>(size_t(kMaxRecvs) * kMaxRails);
  Completion& op = stripeOps[size_t(buffer) * kMaxRails + size_t(stripe)];
  op.request = this;
  op.index = buffer;
  op.stripe = stripe;
  return op;
}

Endpoint::Endpoint(const Device& device, int deviceIndex)
    : deviceIndex_(deviceIndex), maxMessageBytes_(device.maxMessageBytes), info_(fi_dupinfo(device.info.get())) {
  if (!info_) throw Error(Code::SystemError, "plugin: fi_dupinfo failed");
  fid_fabric* fabric = nullptr;
  ofi::checkFi(fi_fabric(info_->fabric_attr, &fabric, nullptr), "fi_fabric");
  fabric_.reset(fabric);
  fid_domain* domain = nullptr;
  ofi::checkFi(fi_domain(fabric, info_.get(), &domain, nullptr), "fi_domain");
  domain_.reset(domain);

  // NCCL polls (test), so the queue needs no wait object.
  fi_cq_attr cqAttr{};
  cqAttr.format = FI_CQ_FORMAT_TAGGED;
  cqAttr.size = info_->tx_attr->size + info_->rx_attr->size;
  cqAttr.wait_obj = FI_WAIT_NONE;
  fid_cq* cq = nullptr;
  ofi::checkFi(fi_cq_open(domain, &cqAttr, &cq, nullptr), "fi_cq_open");
  cq_.reset(cq);

  fi_av_attr avAttr{};
  avAttr.type = FI_AV_TABLE;
  fid_av* av = nullptr;
  ofi::checkFi(fi_av_open(domain, &avAttr, &av, nullptr), "fi_av_open");
  av_.reset(av);

  fid_ep* ep = nullptr;
  ofi::checkFi(fi_endpoint(domain, info_.get(), &ep, nullptr), "fi_endpoint");
  ep_.reset(ep);
  ofi::checkFi(fi_ep_bind(ep, &av->fid, 0), "fi_ep_bind(av)");
  ofi::checkFi(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  ofi::checkFi(fi_enable(ep), "fi_enable");

  injectBytes_ = info_->tx_attr->inject_size;
  localMr_ = (info_->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
  mrCache_ = std::make_unique<ofi::MrCache>(domain, ep, info_->domain_attr->mr_mode, FI_SEND | FI_RECV,
                                            size_t(config::getInt(config::Var::OFI_MR_CACHE_ENTRIES)));

  address_.resize(256);
  size_t len = address_.size();
  int rc = fi_getname(&ep->fid, address_.data(), &len);
  if (rc == -FI_ETOOSMALL) {
    address_.resize(len);
    rc = fi_getname(&ep->fid, address_.data(), &len);
  }
  ofi::checkFi(rc, "fi_getname");
  address_.resize(len);
  CFX_INFO(kNet, "plugin: opened endpoint on device %d (%s, %zu-byte address)", deviceIndex, device.name.c_str(), len);
}

// Members close in reverse order: registrations, endpoint, address vector, queue, domain, fabric.
Endpoint::~Endpoint() = default;

fi_addr_t Endpoint::peer(const uint8_t* address, size_t len) {
  std::string key(reinterpret_cast<const char*>(address), len);
  auto it = peers_.find(key);
  if (it != peers_.end()) return it->second;
  fi_addr_t out = FI_ADDR_NOTAVAIL;
  const int n = fi_av_insert(av_.get(), address, 1, &out, 0, nullptr);
  if (n != 1) throw Error(Code::SystemError, "plugin: fi_av_insert of a peer's address failed (" + std::to_string(n) + ")");
  peers_.emplace(std::move(key), out);
  return out;
}

uint32_t Endpoint::nextId() {
  static std::atomic<uint32_t> nextId_{1};
  uint32_t id = nextId_.load(std::memory_order_relaxed);
  uint32_t next = 0;
  do {
    next = id == kMaxConnectionId ? 1 : id + 1;
  } while (!nextId_.compare_exchange_weak(id, next, std::memory_order_relaxed));
  return id;
}

ssize_t Endpoint::send(Request& r, const void* data, size_t len, void* desc, fi_addr_t to, uint64_t tag) {
  const ssize_t rc = send(r.ops[0], data, len, desc, to, tag);
  if (rc == 0) r.posted = 1;
  return rc;
}

ssize_t Endpoint::send(Completion& op, const void* data, size_t len, void* desc, fi_addr_t to, uint64_t tag) {
  if (len <= injectBytes_) return fi_tinject(ep_.get(), data, len, to, tag);  // copied: no completion comes
  // Counted before the post: another thread may read the completion on this endpoint's queue right after.
  op.request->pending.fetch_add(1, std::memory_order_relaxed);
  op.ep = this;
  const ssize_t rc = fi_tsend(ep_.get(), data, len, desc, to, tag, &op.fi);
  if (rc != 0) op.request->pending.fetch_sub(1, std::memory_order_relaxed);
  return rc;
}

ssize_t Endpoint::postRecv(Request& r) {
  const int i = r.posted;
  // A data receive also takes the header of a striped message for the same tag (net_endpoint.h).
  const uint64_t ignore = r.kind == Request::Kind::Recv ? kHeaderBit : 0;
  r.ops[i].ep = this;
  r.pending.fetch_add(1, std::memory_order_relaxed);
  const ssize_t rc =
      fi_trecv(ep_.get(), r.data[i], r.sizes[i], r.desc[i], FI_ADDR_UNSPEC, r.tags[i], ignore, &r.ops[i].fi);
  if (rc == 0) {
    ++r.posted;
  } else {
    r.pending.fetch_sub(1, std::memory_order_relaxed);
  }
  return rc;
}

ssize_t Endpoint::postStripe(Completion& op, void* data, size_t len, void* desc, uint64_t tag) {
  op.ep = this;
  op.bytes = 0;
  op.request->pending.fetch_add(1, std::memory_order_relaxed);
  const ssize_t rc = fi_trecv(ep_.get(), data, len, desc, FI_ADDR_UNSPEC, tag, 0, &op.fi);
  if (rc != 0) op.request->pending.fetch_sub(1, std::memory_order_relaxed);
  return rc;
}

void Endpoint::cancel(Request& r) {
  for (Completion& op : r.ops) {
    if (op.ep == this) fi_cancel(&ep_->fid, &op.fi);
  }
  if (!r.stripeOps) return;
  for (size_t k = 0; k < size_t(kMaxRecvs) * kMaxRails; ++k) {
    if (r.stripeOps[k].ep == this) fi_cancel(&ep_->fid, &r.stripeOps[k].fi);
  }
}

namespace {

/// Receive buffer i's first operation completed: a whole message, or a striped one's lead piece, whose
/// stripes the thread driving the comm then posts (net_data.cc), not under this endpoint's lock.
void arrived(Request& r, int i, bool lead) {
  if (lead) r.unposted.fetch_add(1, std::memory_order_relaxed);
  r.arrival[i].store(lead ? Request::kLead : Request::kWhole, std::memory_order_release);
  if (r.comm->striping) r.comm->headersWaiting.store(true, std::memory_order_release);
}

}  // namespace

int Endpoint::progress() {
  return ofi::drainCompletions(
      cq_.get(),
      [&](const fi_cq_tagged_entry& e) {
        auto* op = static_cast<Completion*>(e.op_context);
        if (op == nullptr || op->request == nullptr) return;
        Request& r = *op->request;
        op->ep = nullptr;
        if (op->stripe >= 0) {
          op->bytes = e.len;
        } else if (r.kind != Request::Kind::Send) {
          r.sizes[op->index] = e.len;
          if (r.kind == Request::Kind::Recv) arrived(r, op->index, (e.tag & kHeaderBit) != 0);
        }
        r.pending.fetch_sub(1, std::memory_order_acq_rel);
      },
      [&] { onError(); },
      [&](int err) { CFX_WARN(kNet, "plugin: fi_cq_read on device %d: %s", deviceIndex_, fi_strerror(err)); });
}

void Endpoint::onError() {
  fi_cq_err_entry err{};
  if (fi_cq_readerr(cq_.get(), &err, 0) < 0) return;
  auto* op = static_cast<Completion*>(err.op_context);
  if (op == nullptr || op->request == nullptr) return;
  Request& r = *op->request;
  op->ep = nullptr;
  if (r.kind == Request::Kind::Recv && op->stripe < 0) {
    // A lead piece cut short: its stripes are still received (cut too), so that the sender's complete.
    // Its size: rxm reports the whole message in len, others what fitted in len and the rest in olen.
    const bool lead = err.err == FI_ETRUNC && (err.tag & kHeaderBit) != 0;
    if (lead) r.sizes[op->index] = std::max(err.len, r.capacity[op->index] + err.olen);
    arrived(r, op->index, lead);  // any other failure ends the buffer: later ones of its tag go on
  }
  if (err.err == FI_ECANCELED) {
    r.fail(abi::kInternalError);
    r.pending.fetch_sub(1, std::memory_order_acq_rel);
    return;
  }
  char buf[256] = {0};
  const char* provider = fi_cq_strerror(cq_.get(), err.prov_errno, err.err_data, buf, sizeof buf);
  const bool truncated = err.err == FI_ETRUNC;
  CFX_WARN(kNet, "plugin: %s on device %d failed: %s%s (provider: %s)",
           r.kind == Request::Kind::Send ? "send" : r.kind == Request::Kind::Recv ? "receive" : "handshake message",
           deviceIndex_, fi_strerror(err.err),
           truncated ? " (the message is larger than the receive buffer)" : "", provider ? provider : "");
  r.fail(truncated ? abi::kInvalidUsage : abi::kRemoteError);
  r.pending.fetch_sub(1, std::memory_order_acq_rel);
}

bool Endpoint::drain(Request& r, int timeoutMs) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (r.pending > 0 && std::chrono::steady_clock::now() < until) {
    if (progress() == 0) std::this_thread::yield();
  }
  return r.pending == 0;
}

bool Endpoint::cancelAndDrain(Request& r) {
  if (r.pending == 0) return true;
  cancel(r);
  if (drain(r, 2000)) return true;
  CFX_WARN(kNet, "plugin: %d operation(s) on device %d did not finish after cancellation; their memory is kept",
           r.pending.load(), deviceIndex_);
  return false;
}

}  // namespace conflux::plugin
