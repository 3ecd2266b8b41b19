// Contexts, listen/connect/accept (the handshake described in net_comm.h) and closing comms.
#include <rdma/fi_errno.h>

#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "plugin/net_comm.h"
#include "plugin/net_devices.h"

namespace conflux::plugin {
namespace {

/// Registration of a handshake buffer where the provider wants local descriptors (FI_MR_LOCAL).
void* controlDesc(Comm& comm, void* p, size_t bytes) {
  if (!comm.ep->localMr()) return nullptr;
  Status err;
  ofi::MemoryRegion* r = comm.ep->mrCache().acquire(p, bytes, &err);
  if (r == nullptr) throw Error(err.code(), "plugin: registering a handshake buffer: " + err.message());
  comm.pinned.push_back(r);
  return r->desc;
}

void unpin(Comm& comm) {
  for (ofi::MemoryRegion* r : comm.pinned) comm.ep->mrCache().release(r);
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
  if (r.error != abi::kSuccess) {
    throw Error(static_cast<Code>(r.error), std::string("plugin: handshake ") + what + " failed");
  }
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
  auto comm = std::make_unique<ListenComm>(ctx.endpoint(dev), ctx.maxRequests());
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
  if (h->magic != kHandleMagic || h->addressBytes > sizeof h->address) {
    throw Error(Code::InvalidArgument, "plugin: connect was given a handle that no Conflux listen wrote");
  }
  auto* c = reinterpret_cast<SendComm*>(uintptr_t(h->connectState));
  if (c == nullptr) {
    auto comm = std::make_unique<SendComm>(ctx.endpoint(dev), ctx.maxRequests());
    std::lock_guard<std::mutex> lock(comm->ep->mutex);
    const std::vector<uint8_t>& self = comm->ep->address();
    comm->peer = comm->ep->peer(h->address, h->addressBytes);
    comm->id = comm->ep->nextId();
    comm->listenId = h->listenId;
    comm->hello.magic = kHandleMagic;
    comm->hello.sendCommId = comm->id;
    comm->hello.addressBytes = uint32_t(self.size());
    std::memcpy(comm->hello.address, self.data(), self.size());
    prepareRecv(comm->replyReq, &comm->reply, sizeof comm->reply,
                controlDesc(*comm, &comm->reply, sizeof comm->reply), controlTag(comm->id, kAcceptMsg));
    comm->helloReq.reset(Request::Kind::Control, 1);
    comm->helloReq.desc[0] = controlDesc(*comm, &comm->hello, sizeof comm->hello);
    c = comm.release();
    h->connectState = uint64_t(uintptr_t(c));
  }
  Endpoint& ep = *c->ep;
  std::lock_guard<std::mutex> lock(ep.mutex);
  try {
    if (c->replyReq.posted == 0 && !posted(ep.postRecv(c->replyReq), "fi_trecv(accept)")) return nullptr;
    if (c->helloReq.posted == 0 &&
        !posted(ep.send(c->helloReq, &c->hello, sizeof c->hello, c->helloReq.desc[0], c->peer,
                        controlTag(c->listenId, kConnectMsg)),
                "fi_tsend(connect)")) {
      return nullptr;
    }
    ep.progress();
    if (!c->helloReq.finished() || !c->replyReq.finished()) return nullptr;
    checkFinished(c->helloReq, "CONNECT send");
    checkFinished(c->replyReq, "ACCEPT receive");
    if (c->reply.magic != kHandleMagic) throw Error(Code::RemoteError, "plugin: malformed ACCEPT message");
  } catch (...) {
    h->connectState = 0;
    throw;  // the half-open comm stays allocated: its buffers may still be known to the provider
  }
  c->remoteId = c->reply.recvCommId;
  c->connected = true;
  h->connectState = 0;
  unpin(*c);
  CFX_INFO(kNet, "plugin: connected on device %d (send comm %u -> receive comm %u)", ep.deviceIndex(), c->id,
           c->remoteId);
  return c;
}

RecvComm* accept(ListenComm& l) {
  Endpoint& ep = *l.ep;
  std::lock_guard<std::mutex> lock(ep.mutex);
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
    if (l.inbox.magic != kHandleMagic || l.inbox.addressBytes > sizeof l.inbox.address) {
      throw Error(Code::RemoteError, "plugin: malformed CONNECT message");
    }
    auto comm = std::make_unique<RecvComm>(l.ep, l.maxRequests);
    comm->id = ep.nextId();
    comm->peer = ep.peer(l.inbox.address, l.inbox.addressBytes);
    l.answer.magic = kHandleMagic;
    l.answer.recvCommId = comm->id;
    l.accepting = std::move(comm);
    l.answerReq.reset(Request::Kind::Control, 1);
    l.answerReq.desc[0] = controlDesc(l, &l.answer, sizeof l.answer);
    l.phase = ListenComm::Phase::Replying;
  }
  if (l.answerReq.posted == 0) {
    if (!posted(ep.send(l.answerReq, &l.answer, sizeof l.answer, l.answerReq.desc[0], l.accepting->peer,
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
  CFX_INFO(kNet, "plugin: accepted on device %d (receive comm %u <- send comm %u)", ep.deviceIndex(),
           l.accepting->id, l.inbox.sendCommId);
  return l.accepting.release();
}

namespace {

/// Finishes or cancels what `comm` still has posted. Returns false when the provider still holds some
/// of its buffers (the comm must then stay allocated).
bool quiesce(Comm& comm, std::initializer_list<Request*> control, RequestPool* pool, bool cancel) {
  bool clean = true;
  auto settle = [&](Request& r) {
    if (r.pending == 0) return;
    const bool cancellable = cancel || r.kind != Request::Kind::Send;  // sends finish, they are not cancelled
    clean &= cancellable ? comm.ep->cancelAndDrain(r) : comm.ep->drain(r, 5000);
  };
  for (Request* r : control) settle(*r);
  if (pool != nullptr) {
    for (Request& r : pool->all()) {
      if (r.inUse) settle(r);
    }
  }
  unpin(comm);
  return clean;
}

template <class C>
void destroy(C* comm, std::initializer_list<Request*> control, RequestPool* pool, bool cancel) {
  std::shared_ptr<Endpoint> ep = comm->ep;  // outlives the lock
  std::unique_lock<std::mutex> lock(ep->mutex);
  const bool clean = quiesce(*comm, control, pool, cancel);
  lock.unlock();
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
  destroy(comm, {&comm->helloReq, &comm->replyReq}, &comm->pool, false);
}

void closeRecv(RecvComm* comm) {
  if (comm == nullptr) return;
  destroy(comm, {}, &comm->pool, true);
}

}  // namespace conflux::plugin
