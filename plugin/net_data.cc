// The plugin's data path: registration on every rail, isend (whole or striped), grouped irecv, test.
//
// Striping: a comm with more than one rail (a virtual device on both sides) splits a message of at least
// CONFLUX_PLUGIN_STRIPE_BYTES over its rails, so one connection moves as much as all its NICs together.
//
//   sender    posts, in order: the lead piece, the first L bytes (leadBytes: about 1/129 of the message
//             on two rails), on rails[0] with NCCL's tag and the lead bit; then stripe j, P = 64 L bytes
//             from L + j P (shorter or empty at the end), on rails[j] with stripeTag(j, NCCL's tag). The
//             request finishes once every send completed.
//   receiver  posts one receive per buffer on rails[0] for NCCL's tag, ignoring the lead bit. A whole
//             message lands there and finishes the buffer. A lead piece lands at the buffer's start and
//             its length gives P; the thread that next progresses a comm of the context posts the K
//             stripes' receives, each on its rail at its offset with room for P bytes (cut at the
//             buffer's end). The buffer reports the lead's and the stripes' bytes together: the sent size.
//
// The receiver cannot post the stripes earlier: their offsets depend on the sent size, which only the
// sender knows (NCCL may send less than the receive buffer holds). Nothing but data travels in the
// buffer, so receives posted into overlapping memory (a benchmark's) cannot confuse it. Stripes that
// arrive before their receives wait in the provider as unexpected messages; the cost is the lead's
// transfer and one one-way time per message, which NCCL's several steps in flight per connection hide.
// Stripes carry NCCL's tag: for each tag the receiver posts stripes in irecv order (RecvComm::order), so
// by FI_ORDER_SAS each stripe receive matches the stripe of its own message.
//
// Threads: a comm's data path runs under its dataMutex; an endpoint's mutex is taken alone under it, one
// at a time, for each call into libfabric.
#include "plugin/net_data.h"

#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "plugin/net_metrics.h"

namespace conflux::plugin {
namespace {

void checkSize(const Endpoint& ep, size_t size) {
  const size_t limit = ep.maxMessageBytes();
  if (size > limit) {
    throw Error(Code::InvalidArgument, "plugin: message of " + std::to_string(size) +
                                           " bytes exceeds the device's maximum of " + std::to_string(limit));
  }
}

void countRetry(const Endpoint& ep) { DeviceCounters::add(deviceCounters(ep.deviceIndex()).retries); }

void postReadyStripes(RecvComm& comm);

/// Reads completions on every rail of the comm (whose dataMutex the caller holds), then posts the stripes
/// of headers that arrived for any receive comm of its context: a send can finish only once its peer
/// posted the stripes' receives, and the peer may be waiting on a send of its own rather than testing
/// that receive (another thread driving that comm keeps its lock; it posts them itself).
void progressAll(Comm& comm) {
  for (const auto& ep : comm.rails) {
    std::lock_guard<std::mutex> lock(ep->mutex);
    ep->progress();
  }
  if (comm.ctx == nullptr) return;
  comm.ctx->forEachRecvComm([&](RecvComm& other) {
    if (!other.headersWaiting.load(std::memory_order_acquire)) return;
    if (&other == &comm) {
      postReadyStripes(other);
    } else if (other.dataMutex.try_lock()) {
      postReadyStripes(other);
      other.dataMutex.unlock();
    }
  });
}

/// Posts what remains of comm.partial, a send: the whole message, or the lead piece and then each stripe.
/// Returns 0 when all is posted (or the request failed), else the last libfabric result (-FI_EAGAIN: try
/// again later).
ssize_t postRestSend(SendComm& comm) {
  Request& r = *comm.partial;
  const uint64_t bytes = r.sizes[0];
  const uint64_t lead = r.total == 1 ? bytes : leadBytes(bytes, r.total - 1);
  auto* base = static_cast<uint8_t*>(r.data[0]);
  while (r.posted < r.total && r.failure() == abi::kSuccess) {
    const int j = r.posted - 1;  // the stripe (-1: the whole message or the lead piece)
    Endpoint& ep = *comm.rails[size_t(j < 0 ? 0 : j)];
    void* desc = r.regs[0] != nullptr ? r.regs[0]->desc(j < 0 ? 0 : j) : nullptr;
    ssize_t rc = 0;
    {
      std::lock_guard<std::mutex> lock(ep.mutex);
      if (j < 0) {
        rc = ep.send(r.ops[0], base, lead, desc, comm.peers[0], r.tags[0]);
      } else {
        const uint64_t off = std::min(stripeOffset(lead, j), bytes);
        rc = ep.send(r.stripeOp(0, j), base + off, stripeBytes(bytes, lead, j), desc, comm.peers[size_t(j)],
                     stripeTag(comm.remoteId, j, r.ncclTags[0]));
      }
    }
    if (rc == -FI_EAGAIN) {
      countRetry(ep);
      return rc;
    }
    if (rc != 0) {
      if (r.posted > 0) {
        CFX_WARN(kNet, "plugin: %s", ofi::fiErrorMessage("fi_tsend", int(rc)).c_str());
        r.fail(abi::kSystemError);
        break;
      }
      return rc;
    }
    ++r.posted;
  }
  comm.partial = nullptr;
  return 0;
}

/// Posts what remains of comm.partial, a receive: one operation per buffer, on rails[0].
void postRestRecv(RecvComm& comm) {
  Request& r = *comm.partial;
  Endpoint& ep = *comm.rails[0];
  std::lock_guard<std::mutex> lock(ep.mutex);
  while (r.posted < r.total && r.failure() == abi::kSuccess) {
    const ssize_t rc = ep.postRecv(r);
    if (rc == -FI_EAGAIN) {
      countRetry(ep);
      return;
    }
    if (rc != 0) {
      CFX_WARN(kNet, "plugin: %s", ofi::fiErrorMessage("fi_trecv", int(rc)).c_str());
      r.fail(abi::kSystemError);
    }
  }
  comm.partial = nullptr;
}

/// Posts the stripes of buffer i of r, whose lead piece arrived. Returns false when the provider's
/// queue was full (the rest is posted later).
bool postStripes(RecvComm& comm, Request& r, int i) {
  const uint64_t lead = r.sizes[i];
  const uint64_t cap = r.capacity[i];
  if (lead == 0 && r.stripesPosted[i] == 0) {
    CFX_WARN(kNet, "plugin: receive comm %u got a striped message's lead of 0 bytes; is the peer another "
             "Conflux build?", comm.id);
    r.fail(abi::kRemoteError);
  }
  while (r.stripesPosted[i] < comm.stripes) {
    const int j = r.stripesPosted[i];
    // Room for a whole stripe, cut at the buffer's end; a stripe wholly past it gets the last byte (the
    // request's own byte for a buffer of none), so that a message too large is reported (a zero-byte
    // receive does not say so on every provider) and an empty stripe still has a receive. A lead of zero
    // bytes comes from no Conflux sender: nothing is posted and the buffer fails (stripedSize).
    const uint64_t off = stripeOffset(lead, j);
    uint64_t len = std::min(kStripePerLead * lead, off < cap ? cap - off : 0);
    auto* into = static_cast<uint8_t*>(r.data[i]) + off;
    void* desc = r.regs[i] != nullptr ? r.regs[i]->desc(j) : nullptr;
    if (len == 0) {
      len = 1;
      into = cap > 0 ? static_cast<uint8_t*>(r.data[i]) + cap - 1 : &r.sink;
      if (cap == 0) desc = nullptr;
    }
    Completion& op = r.stripeOp(i, j);
    op.bytes = 0;
    ssize_t rc = 0;
    Endpoint& ep = *comm.rails[size_t(j)];
    if (lead > 0) {
      std::lock_guard<std::mutex> lock(ep.mutex);
      rc = ep.postStripe(op, into, size_t(len), desc, stripeTag(comm.id, j, r.ncclTags[i]));
    }
    if (rc == -FI_EAGAIN) {
      countRetry(ep);
      return false;
    }
    if (rc != 0) {
      CFX_WARN(kNet, "plugin: %s", ofi::fiErrorMessage("fi_trecv", int(rc)).c_str());
      r.fail(abi::kSystemError);
      r.stripesPosted[i] = comm.stripes;
      break;
    }
    ++r.stripesPosted[i];
  }
  r.unposted.fetch_sub(1, std::memory_order_acq_rel);
  return true;
}

/// Walks the comm's receive buffers in irecv order and posts the stripes of those whose lead piece
/// arrived, unless an earlier buffer of the same tag is still waiting for its message (its stripes, or
/// its whole message, come first on the wire). The caller holds the comm's dataMutex.
void postReadyStripes(RecvComm& comm) {
  if (!comm.headersWaiting.exchange(false, std::memory_order_acq_rel)) return;
  std::vector<int> blocked;  // tags with an earlier buffer still waiting
  bool retry = false;
  size_t keep = 0;
  for (const RecvComm::Pending& p : comm.order) {
    Request& r = *p.request;
    const int tag = r.ncclTags[p.buffer];
    bool done = false;
    if (std::find(blocked.begin(), blocked.end(), tag) == blocked.end()) {
      switch (r.arrival[p.buffer].load(std::memory_order_acquire)) {
        case Request::kWhole: done = true; break;
        case Request::kLead:
          done = postStripes(comm, r, p.buffer);
          retry |= !done;
          break;
        default: break;
      }
      if (!done) blocked.push_back(tag);
    }
    if (!done) comm.order[keep++] = p;
  }
  comm.order.resize(keep);
  if (retry) comm.headersWaiting.store(true, std::memory_order_release);
}

/// Drops r's buffers from the comm's order (r is going back to the pool).
void forget(RecvComm& comm, const Request* r) {
  const auto gone = std::remove_if(comm.order.begin(), comm.order.end(),
                                   [&](const RecvComm::Pending& p) { return p.request == r; });
  if (gone == comm.order.end()) return;
  comm.order.erase(gone, comm.order.end());
  comm.headersWaiting.store(true, std::memory_order_release);  // later buffers of its tags may go on
}

/// A finished receive's striped buffer i: its lead's bytes and its stripes', which must be what a
/// Conflux sender makes of that size. Returns its size.
size_t stripedSize(const RecvComm& comm, Request& r, int i) {
  const uint64_t lead = r.sizes[i];
  uint64_t got = lead;
  for (int j = 0; j < comm.stripes; ++j) got += r.stripeOp(i, j).bytes;
  bool consistent = leadBytes(got, comm.stripes) == lead;
  for (int j = 0; j < comm.stripes; ++j) consistent &= r.stripeOp(i, j).bytes == stripeBytes(got, lead, j);
  if (!consistent && r.failure() == abi::kSuccess) {
    CFX_WARN(kNet, "plugin: receive comm %u: a striped message of %llu bytes came in pieces no Conflux sender "
             "makes (a lead of %llu bytes); is the peer another Conflux build?", comm.id,
             static_cast<unsigned long long>(got), static_cast<unsigned long long>(lead));
    r.fail(abi::kRemoteError);
  }
  if (r.failure() == abi::kSuccess) {  // counted per rail, like whole messages only on success
    DeviceCounters::add(deviceCounters(comm.rails[0]->deviceIndex()).receivedBytes, lead);
    for (int j = 0; j < comm.stripes; ++j) {
      DeviceCounters::add(deviceCounters(comm.rails[size_t(j)]->deviceIndex()).receivedBytes,
                          r.stripeOp(i, j).bytes);
    }
  }
  return size_t(got);
}

}  // namespace

Registration* registerMemory(Comm& comm, void* data, size_t size) {
  auto reg = std::make_unique<Registration>();
  if (size == 0) return reg.release();  // nothing to register, no descriptor
  for (size_t j = 0; j < comm.rails.size(); ++j) {
    Status err;
    {
      std::lock_guard<std::mutex> lock(comm.rails[j]->mutex);
      reg->rails[j] = comm.rails[j]->mrCache().acquire(data, size, &err);
    }
    if (reg->rails[j] == nullptr) {
      for (size_t k = 0; k < j; ++k) {  // one endpoint's lock at a time
        std::lock_guard<std::mutex> other(comm.rails[k]->mutex);
        comm.rails[k]->mrCache().release(reg->rails[k]);
      }
      throw Error(err.code(), "plugin: regMr of " + std::to_string(size) + " bytes: " + err.message());
    }
  }
  return reg.release();
}

void deregisterMemory(Comm& comm, Registration* reg) {
  if (reg == nullptr) return;
  std::unique_ptr<Registration> owned(reg);
  for (size_t j = 0; j < comm.rails.size(); ++j) {
    ofi::MemoryRegion* region = reg->rails[j];
    if (region == nullptr) continue;
    Endpoint& ep = *comm.rails[j];
    std::lock_guard<std::mutex> lock(ep.mutex);
    void* addr = region->addr;
    const size_t bytes = region->bytes;
    ep.mrCache().release(region);
    // NCCL may free the memory next; a cached registration would then outlive its pages.
    ep.mrCache().invalidate(addr, bytes);
  }
}

Request* isend(SendComm& comm, void* data, size_t size, int tag, const Registration* reg) {
  if (!comm.connected) throw Error(Code::InvalidUsage, "plugin: isend on a comm that is not connected");
  checkSize(*comm.ep, size);
  std::lock_guard<std::mutex> lock(comm.dataMutex);
  // Sends are posted in call order (equal tags match in that order), so a partly posted one goes first.
  if (comm.partial != nullptr) postRestSend(comm);
  Request* r = comm.partial == nullptr ? comm.pool.take() : nullptr;
  if (r == nullptr) {
    progressAll(comm);
    return nullptr;
  }
  r->reset(Request::Kind::Send, 1);
  r->comm = &comm;
  r->data[0] = data;
  r->sizes[0] = size;
  r->regs[0] = reg;
  r->tags[0] = dataTag(comm.remoteId, tag);
  r->ncclTags[0] = tag;
  if (comm.stripes > 1 && comm.stripeBytes > 0 && size >= comm.stripeBytes) {
    r->total = 1 + comm.stripes;
    r->tags[0] |= kHeaderBit;
  }
  comm.partial = r;
  const ssize_t rc = postRestSend(comm);
  if (r->posted == 0) {  // nothing went out: NCCL calls again (or gets the error)
    comm.partial = nullptr;
    comm.pool.put(r);
    if (rc == -FI_EAGAIN) {
      progressAll(comm);
      return nullptr;
    }
    throw Error(Code::SystemError, "plugin: " + ofi::fiErrorMessage("fi_tsend", int(rc)));
  }
  return r;
}

Request* irecv(RecvComm& comm, int n, void** data, const size_t* sizes, const int* tags,
               const Registration* const* regs) {
  if (n < 1 || n > kMaxRecvs) {
    throw Error(Code::InvalidArgument, "plugin: irecv of " + std::to_string(n) + " buffers (1.." +
                                           std::to_string(kMaxRecvs) + ")");
  }
  for (int i = 0; i < n; ++i) checkSize(*comm.ep, sizes[i]);
  std::lock_guard<std::mutex> lock(comm.dataMutex);
  // Receives are posted in call order (equal tags match in that order), so a partly posted one goes first.
  if (comm.partial != nullptr) postRestRecv(comm);
  if (comm.stripes > 1) postReadyStripes(comm);
  Request* r = comm.partial == nullptr ? comm.pool.take() : nullptr;
  if (r == nullptr) {
    progressAll(comm);
    return nullptr;
  }
  r->reset(Request::Kind::Recv, n);
  r->comm = &comm;
  for (int i = 0; i < n; ++i) {
    r->data[i] = data[i];
    r->sizes[i] = sizes[i];
    r->capacity[i] = sizes[i];
    r->tags[i] = dataTag(comm.id, tags[i]);
    r->ncclTags[i] = tags[i];
    r->regs[i] = regs != nullptr ? regs[i] : nullptr;
    r->desc[i] = r->regs[i] != nullptr ? r->regs[i]->desc(0) : nullptr;
  }
  ssize_t rc = 0;
  {
    std::lock_guard<std::mutex> epLock(comm.rails[0]->mutex);
    rc = comm.rails[0]->postRecv(*r);
  }
  if (rc != 0) {
    comm.pool.put(r);
    if (rc == -FI_EAGAIN) {
      countRetry(*comm.rails[0]);
      progressAll(comm);
      return nullptr;
    }
    throw Error(Code::SystemError, "plugin: " + ofi::fiErrorMessage("fi_trecv", int(rc)));
  }
  if (comm.striping) {
    for (int i = 0; i < n; ++i) comm.order.push_back({r, i});
  }
  comm.partial = r;
  postRestRecv(comm);
  return r;
}

void test(Request* r, int* done, int* sizes) {
  if (r == nullptr || !r->inUse || r->comm == nullptr) {
    throw Error(Code::InvalidArgument, "plugin: test of a request that is not in flight");
  }
  Comm& comm = *r->comm;
  std::lock_guard<std::mutex> lock(comm.dataMutex);
  const bool recv = r->kind == Request::Kind::Recv;
  RecvComm* rc = recv ? &static_cast<RecvComm&>(comm) : nullptr;
  SendComm* sc = recv ? nullptr : &static_cast<SendComm&>(comm);
  auto post = [&] {
    if (rc != nullptr) {
      if (rc->partial != nullptr) postRestRecv(*rc);
      if (rc->stripes > 1) postReadyStripes(*rc);
    } else if (sc->partial != nullptr) {
      postRestSend(*sc);
    }
  };
  post();
  if (!r->finished()) {
    progressAll(comm);
    post();  // headers that just arrived
  }
  if (!r->finished()) {
    *done = 0;
    return;
  }
  *done = 1;
  DeviceCounters& counters = deviceCounters(comm.ep->deviceIndex());
  uint64_t bytes = 0;
  for (int i = 0; i < r->n; ++i) {
    if (recv && r->arrival[i].load(std::memory_order_acquire) == Request::kLead) {
      r->sizes[i] = stripedSize(*rc, *r, i);  // counted per rail
    } else {
      bytes += r->sizes[i];
    }
  }
  if (!recv && r->total > 1) {  // a striped send: its bytes per rail
    const uint64_t lead = leadBytes(r->sizes[0], r->total - 1);
    DeviceCounters::add(counters.sentBytes, lead);
    for (int j = 0; j + 1 < r->total; ++j) {
      DeviceCounters::add(deviceCounters(comm.rails[size_t(j)]->deviceIndex()).sentBytes,
                          stripeBytes(r->sizes[0], lead, j));
    }
    bytes = 0;
  }
  const abi::Result error = r->failure();
  if (sizes != nullptr) {
    for (int i = 0; i < r->n; ++i) sizes[i] = int(r->sizes[i]);
  }
  if (error != abi::kSuccess) {
    DeviceCounters::add(counters.errors);
  } else {
    DeviceCounters::add(recv ? counters.receivedBytes : counters.sentBytes, bytes);
    DeviceCounters::add(recv ? counters.receivedMessages : counters.sentMessages, uint64_t(r->n));
  }
  if (recv && rc->striping) forget(*rc, r);  // a failed request may have buffers still waiting
  (recv ? rc->pool : sc->pool).put(r);
  if (error != abi::kSuccess) {
    throw Error(static_cast<Code>(error), std::string("plugin: a ") + (recv ? "receive" : "send") + " on device " +
                                              std::to_string(comm.ep->deviceIndex()) +
                                              " failed (see the warning above)");
  }
}

}  // namespace conflux::plugin
