// Contexts, listen/connect/accept (the handshake described in net_comm.h) and closing comms.
#include <rdma/fi_errno.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "plugin/net_comm.h"
#include "plugin/net_devices.h"
#include "plugin/net_handshake.h"
#include "plugin/net_metrics.h"

namespace conflux::plugin {
namespace {

/// Registration of a handshake buffer where the provider wants local descriptors (FI_MR_LOCAL).
void* controlDesc(Comm& comm, void* p, size_t bytes) {
  if (!comm.ctl->localMr()) return nullptr;
  Status err;
  ofi::MemoryRegion* r = comm.ctl->mrCache().acquire(p, bytes, &err);
  if (r == nullptr) throw Error(err.code(), "plugin: registering a handshake buffer: " + err.message());
  comm.pinned.push_back(r);
  return r->desc;
}

void unpin(Comm& comm) {
  for (ofi::MemoryRegion* r : comm.pinned) comm.ctl->mrCache().release(r);
  comm.pinned.clear();
}

void prepareRecv(Request& r, void* buf, size_t bytes, void* desc, uint64_t tag) {
  r.reset(Request::Kind::Control, 1);
  r.data[0] = buf;
  r.sizes[0] = bytes;
  r.desc[0] = desc;
  r.tags[0] = tag;
}

/// True when posted; false on -FI_EAGAIN (try again on the next call); throws on errors.
bool posted(ssize_t rc, const char* what) {
  if (rc == 0) return true;
  if (rc == -FI_EAGAIN) return false;
  throw Error(Code::SystemError, "plugin: " + ofi::fiErrorMessage(what, int(rc)));
}

void checkFinished(const Request& r, const char* what) {
  if (r.failure() != abi::kSuccess) {
    throw Error(static_cast<Code>(r.failure()), std::string("plugin: handshake ") + what + " failed");
  }
}

RailAddresses fillAddresses(const std::vector<const Endpoint*>& eps) {
  RailAddresses out{};
  out.count = uint32_t(eps.size());
  for (size_t m = 0; m < eps.size(); ++m) {
    const std::vector<uint8_t>& a = eps[m]->address();  // fixed once the endpoint is open: no lock
    if (a.size() > sizeof out.address[m]) {
      throw Error(Code::InternalError, "plugin: endpoint address of " + std::to_string(a.size()) +
                                           " bytes does not fit the handshake");
    }
    out.bytes[m] = uint32_t(a.size());
    std::memcpy(out.address[m], a.data(), a.size());
  }
  return out;
}

/// Every member's data address, in member order (the listen comm's rails).
RailAddresses railAddresses(const std::vector<std::shared_ptr<Endpoint>>& members) {
  std::vector<const Endpoint*> eps;
  for (const auto& e : members) eps.push_back(e.get());
  return fillAddresses(eps);
}

/// The same for a connecting side, whose endpoints the context opens (or shares).
RailAddresses railAddresses(Context& ctx, const std::vector<int>& members) {
  std::vector<std::shared_ptr<Endpoint>> eps;
  for (int m : members) eps.push_back(ctx.endpoint(m));
  return railAddresses(eps);
}

}  // namespace

std::shared_ptr<Endpoint> Context::endpoint(int dev) {
  const Device& d = device(dev);
  std::lock_guard<std::mutex> lock(mutex_);
  if (endpoints_.size() <= size_t(dev)) endpoints_.resize(size_t(dev) + 1);
  std::shared_ptr<Endpoint> ep = endpoints_[size_t(dev)].lock();
  if (!ep) {
    ep = std::make_shared<Endpoint>(d, dev);
    endpoints_[size_t(dev)] = ep;
  }
  return ep;
}

void Context::addRecvComm(RecvComm* c) {
  if (!c->striping) return;
  std::lock_guard<std::mutex> lock(commsMutex_);
  recvComms_.push_back(c);
  stripingComms_.store(recvComms_.size(), std::memory_order_release);
}

void Context::removeRecvComm(RecvComm* c) {
  if (!c->striping) return;
  std::lock_guard<std::mutex> lock(commsMutex_);
  recvComms_.erase(std::remove(recvComms_.begin(), recvComms_.end(), c), recvComms_.end());
  stripingComms_.store(recvComms_.size(), std::memory_order_release);
}

int Context::nextRail(int dev, const uint8_t* peer, size_t peerBytes, int members) {
  std::string key = std::to_string(dev) + ":";
  key.append(reinterpret_cast<const char*>(peer), peerBytes);
  std::lock_guard<std::mutex> lock(mutex_);
  return railCounters_[key]++ % members;
}

Request* RequestPool::take() {
  if (used_ >= limit_) return nullptr;
  for (Request& r : requests_) {
    if (!r.inUse) {
      r.inUse = true;
      ++used_;
      return &r;
    }
  }
  return nullptr;
}

ListenComm* listen(Context& ctx, int dev, void* handle) {
  std::vector<int> members = membersOf(dev);
  auto comm = std::make_unique<ListenComm>(ctx, ctx.endpoint(members[0]), members, ctx.maxRequests());
  for (int m : members) comm->rails.push_back(ctx.endpoint(m));  // opened here, not in accept under a lock
  Endpoint& ep = *comm->ep;
  std::lock_guard<std::mutex> lock(ep.mutex);
  const std::vector<uint8_t>& addr = ep.address();
  ListenHandle h{};
  if (addr.size() > sizeof h.address) {
    throw Error(Code::InternalError, "plugin: endpoint address of " + std::to_string(addr.size()) +
                                         " bytes does not fit the listen handle");
  }
  comm->id = ep.nextId();
  h.magic = kHandleMagic;
  h.listenId = comm->id;
  h.addressBytes = uint16_t(addr.size());
  std::memcpy(h.address, addr.data(), addr.size());
  std::memset(handle, 0, abi::kHandleBytes);
  std::memcpy(handle, &h, sizeof h);
  return comm.release();
}

SendComm* connect(Context& ctx, int dev, void* handle) {
  auto* h = static_cast<ListenHandle*>(handle);
  if (const std::string why = checkHandle(*h); !why.empty()) {
    throw Error(Code::InvalidArgument, "plugin: connect was given a handle that no Conflux listen wrote: " + why);
  }
  auto* c = reinterpret_cast<SendComm*>(uintptr_t(h->connectState));
  if (c == nullptr) {
    const std::vector<int> members = membersOf(dev);
    const int rail = members.size() > 1 ? ctx.nextRail(dev, h->address, h->addressBytes, int(members.size())) : 0;
    auto comm = std::make_unique<SendComm>(ctx.endpoint(members[size_t(rail)]), ctx.maxRequests());
    comm->ctl = ctx.endpoint(members[0]);
    for (size_t j = 1; j < members.size(); ++j) comm->rails.push_back(ctx.endpoint(members[(size_t(rail) + j) % members.size()]));
    comm->hello.data = railAddresses(ctx, members);
    comm->ctx = &ctx;
    std::lock_guard<std::mutex> lock(comm->ctl->mutex);
    const std::vector<uint8_t>& self = comm->ctl->address();
    comm->listener = comm->ctl->peer(h->address, h->addressBytes);
    comm->id = comm->ctl->nextId();
    comm->listenId = h->listenId;
    comm->hello.magic = kHandleMagic;
    comm->hello.sendCommId = comm->id;
    comm->hello.rail = uint32_t(rail);
    if (self.size() > sizeof comm->hello.address) {
      throw Error(Code::InternalError, "plugin: an endpoint address does not fit the CONNECT message");
    }
    comm->hello.addressBytes = uint32_t(self.size());
    std::memcpy(comm->hello.address, self.data(), self.size());
    prepareRecv(comm->replyReq, &comm->reply, sizeof comm->reply,
                controlDesc(*comm, &comm->reply, sizeof comm->reply), controlTag(comm->id, kAcceptMsg));
    comm->helloReq.reset(Request::Kind::Control, 1);
    comm->helloReq.desc[0] = controlDesc(*comm, &comm->hello, sizeof comm->hello);
    c = comm.release();
    h->connectState = uint64_t(uintptr_t(c));
  }
  try {
    Endpoint& ep = *c->ctl;
    std::lock_guard<std::mutex> lock(ep.mutex);
    if (c->replyReq.posted == 0 && !posted(ep.postRecv(c->replyReq), "fi_trecv(accept)")) return nullptr;
    if (c->helloReq.posted == 0 &&
        !posted(ep.send(c->helloReq, &c->hello, sizeof c->hello, c->helloReq.desc[0], c->listener,
                        controlTag(c->listenId, kConnectMsg)),
                "fi_tsend(connect)")) {
      return nullptr;
    }
    ep.progress();
    if (!c->helloReq.finished() || !c->replyReq.finished()) return nullptr;
    checkFinished(c->helloReq, "CONNECT send");
    checkFinished(c->replyReq, "ACCEPT receive");
    if (const std::string why = checkAccept(c->reply, c->replyReq.sizes[0]); !why.empty()) {
      throw Error(Code::RemoteError, "plugin: malformed ACCEPT message: " + why);
    }
    unpin(*c);
  } catch (...) {
    h->connectState = 0;
    throw;  // the half-open comm stays allocated: its buffers may still be known to the provider
  }
  // The receiver's rails[j] is its member (rail + j) % its count (accept); each lock taken alone, after
  // the handshake's.
  c->stripes = int(std::min<size_t>(c->rails.size(), c->reply.data.count));
  for (size_t j = 0; j < size_t(c->stripes); ++j) {
    const size_t m = (c->hello.rail + j) % c->reply.data.count;
    std::lock_guard<std::mutex> lock(c->rails[j]->mutex);
    c->peers.push_back(c->rails[j]->peer(c->reply.data.address[m], c->reply.data.bytes[m]));
  }
  c->stripeBytes = uint64_t(std::max<int64_t>(0, config::getInt(config::Var::PLUGIN_STRIPE_BYTES)));
  c->remoteId = c->reply.recvCommId;
  c->connected = true;
  deviceCounters(c->ep->deviceIndex()).sendComms.fetch_add(1, std::memory_order_relaxed);
  h->connectState = 0;
  CFX_INFO(kNet, "plugin: connected on device %d rail %u (send comm %u -> receive comm %u, %d rail(s) per message)",
           c->ep->deviceIndex(), c->hello.rail, c->id, c->remoteId, c->stripes);
  return c;
}

RecvComm* accept(ListenComm& l) {
  Endpoint& ep = *l.ep;
  std::unique_lock<std::mutex> lock(ep.mutex);
  if (l.phase == ListenComm::Phase::Idle) {
    prepareRecv(l.inboxReq, &l.inbox, sizeof l.inbox, controlDesc(l, &l.inbox, sizeof l.inbox),
                controlTag(l.id, kConnectMsg));
    if (!posted(ep.postRecv(l.inboxReq), "fi_trecv(connect)")) return nullptr;
    l.phase = ListenComm::Phase::WaitConnect;
  }
  ep.progress();
  if (l.phase == ListenComm::Phase::WaitConnect) {
    if (!l.inboxReq.finished()) return nullptr;
    checkFinished(l.inboxReq, "CONNECT receive");
    if (const std::string why = checkConnect(l.inbox, l.inboxReq.sizes[0]); !why.empty()) {
      throw Error(Code::RemoteError, "plugin: malformed CONNECT message: " + why);
    }
    // The data endpoint: the listened device's member of the sender's rail index (opened by listen; its
    // ids are atomic, so no second lock is taken here).
    const size_t home = size_t(l.inbox.rail) % l.rails.size();
    std::shared_ptr<Endpoint> data = l.rails[home];
    auto comm = std::make_unique<RecvComm>(data, l.maxRequests);
    for (size_t j = 1; j < l.rails.size(); ++j) comm->rails.push_back(l.rails[(home + j) % l.rails.size()]);
    comm->stripes = int(std::min<size_t>(l.rails.size(), l.inbox.data.count));
    comm->striping = comm->stripes > 1;
    comm->ctx = l.ctx;
    comm->id = data->nextId();
    l.replyTo = ep.peer(l.inbox.address, l.inbox.addressBytes);
    l.answer.magic = kHandleMagic;
    l.answer.recvCommId = comm->id;
    l.answer.data = railAddresses(l.rails);
    l.accepting = std::move(comm);
    l.answerReq.reset(Request::Kind::Control, 1);
    l.answerReq.desc[0] = controlDesc(l, &l.answer, sizeof l.answer);
    l.phase = ListenComm::Phase::Replying;
  }
  if (l.answerReq.posted == 0) {
    if (!posted(ep.send(l.answerReq, &l.answer, sizeof l.answer, l.answerReq.desc[0], l.replyTo,
                        controlTag(l.inbox.sendCommId, kAcceptMsg)),
                "fi_tsend(accept)")) {
      return nullptr;
    }
    ep.progress();
  }
  if (!l.answerReq.finished()) return nullptr;
  checkFinished(l.answerReq, "ACCEPT send");
  l.phase = ListenComm::Phase::Idle;
  unpin(l);
  std::unique_ptr<RecvComm> comm = std::move(l.accepting);
  const ConnectMessage hello = l.inbox;  // the listen comm may take the next CONNECT once unlocked
  lock.unlock();  // the data endpoint's lock is taken alone, never under the handshake's
  // Providers that answer on their own (rendezvous) want the sender's data endpoints in the address
  // vectors: the sender's rails[j] is its member (rail + j) % its count (connect).
  for (size_t j = 0; j < size_t(comm->stripes); ++j) {
    const size_t m = (hello.rail + j) % hello.data.count;
    std::lock_guard<std::mutex> dataLock(comm->rails[j]->mutex);
    comm->rails[j]->peer(hello.data.address[m], hello.data.bytes[m]);
  }
  CFX_INFO(kNet, "plugin: accepted on device %d rail %u (receive comm %u <- send comm %u)", comm->ep->deviceIndex(),
           hello.rail, comm->id, hello.sendCommId);
  deviceCounters(comm->ep->deviceIndex()).recvComms.fetch_add(1, std::memory_order_relaxed);
  comm->ctx->addRecvComm(comm.get());
  return comm.release();
}

namespace {

/// Finishes or cancels what `comm` still has posted: handshake requests on its ctl endpoint, then data
/// requests, which may have operations on every rail: each endpoint's lock is taken alone. Returns false
/// when the provider still holds some of its buffers (the comm must then stay allocated).
bool quiesce(Comm& comm, std::initializer_list<Request*> control, RequestPool* pool, bool cancel) {
  bool clean = true;
  {
    std::lock_guard<std::mutex> lock(comm.ctl->mutex);
    for (Request* r : control) {
      if (r->pending == 0) continue;
      const bool cancellable = cancel || r->kind != Request::Kind::Send;  // sends finish, they are not cancelled
      clean &= cancellable ? comm.ctl->cancelAndDrain(*r) : comm.ctl->drain(*r, 5000);
    }
    unpin(comm);
  }
  if (pool == nullptr) return clean;
  auto busy = [&] {
    for (Request& r : pool->all()) {
      if (r.inUse && r.pending > 0) return true;
    }
    return false;
  };
  if (cancel) {
    for (const auto& ep : comm.rails) {
      std::lock_guard<std::mutex> lock(ep->mutex);
      for (Request& r : pool->all()) {
        if (r.inUse && r.pending > 0) ep->cancel(r);
      }
    }
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(cancel ? 2000 : 5000);
  while (busy() && std::chrono::steady_clock::now() < until) {
    int read = 0;
    for (const auto& ep : comm.rails) {
      std::lock_guard<std::mutex> lock(ep->mutex);
      read += ep->progress();
    }
    if (read == 0) std::this_thread::yield();
  }
  if (busy()) {
    CFX_WARN(kNet, "plugin: operations on device %d did not finish %s; their memory is kept",
             comm.ep->deviceIndex(), cancel ? "after cancellation" : "within 5 s");
    clean = false;
  }
  return clean;
}

template <class C>
void destroy(C* comm, std::initializer_list<Request*> control, RequestPool* pool, bool cancel) {
  std::shared_ptr<Endpoint> ep = comm->ep;  // outlives the comm, for the warning
  const bool clean = quiesce(*comm, control, pool, cancel);
  if (clean) {
    delete comm;
  } else {
    CFX_WARN(kNet, "plugin: a comm on device %d closed with operations still posted; it is not freed",
             ep->deviceIndex());
  }
}

}  // namespace

void closeListen(ListenComm* comm) {
  if (comm == nullptr) return;
  destroy(comm, {&comm->inboxReq, &comm->answerReq}, nullptr, true);
}

void closeSend(SendComm* comm) {
  if (comm == nullptr) return;
  if (comm->connected) deviceCounters(comm->ep->deviceIndex()).sendComms.fetch_sub(1, std::memory_order_relaxed);
  destroy(comm, {&comm->helloReq, &comm->replyReq}, &comm->pool, false);
}

void closeRecv(RecvComm* comm) {
  if (comm == nullptr) return;
  deviceCounters(comm->ep->deviceIndex()).recvComms.fetch_sub(1, std::memory_order_relaxed);
  comm->ctx->removeRecvComm(comm);  // no other thread posts its stripes from here on
  destroy(comm, {}, &comm->pool, true);
}

}  // namespace conflux::plugin
