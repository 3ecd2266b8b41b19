#include "plugin/net_data.h"

#include <rdma/fi_errno.h>

#include "core/error.h"
#include "core/log.h"
#include "plugin/net_metrics.h"

namespace conflux::plugin {
namespace {

// The handle of zero-byte registrations: nothing to register, no descriptor.
ofi::MemoryRegion emptyRegion;

void* descOf(const ofi::MemoryRegion* mr) { return mr != nullptr ? mr->desc : nullptr; }

/// Posts what remains of a partly posted irecv; clears comm.partial when all is posted.
void postRest(RecvComm& comm) {
  Request& r = *comm.partial;
  while (r.posted < r.n && r.error == abi::kSuccess) {
    const ssize_t rc = comm.ep->postRecv(r);
    if (rc == -FI_EAGAIN) {
      DeviceCounters::add(deviceCounters(comm.ep->deviceIndex()).retries);
      return;
    }
    if (rc != 0) {
      CFX_WARN(kNet, "plugin: %s", ofi::fiErrorMessage("fi_trecv", int(rc)).c_str());
      r.error = abi::kSystemError;
    }
  }
  comm.partial = nullptr;
}

void checkSize(const Endpoint& ep, size_t size) {
  const size_t limit = ep.maxMessageBytes();
  if (size > limit) {
    throw Error(Code::InvalidArgument, "plugin: message of " + std::to_string(size) +
                                           " bytes exceeds the device's maximum of " + std::to_string(limit));
  }
}

}  // namespace

ofi::MemoryRegion* registerMemory(Comm& comm, void* data, size_t size) {
  if (size == 0) return &emptyRegion;
  std::lock_guard<std::mutex> lock(comm.ep->mutex);
  Status err;
  ofi::MemoryRegion* r = comm.ep->mrCache().acquire(data, size, &err);
  if (r == nullptr) throw Error(err.code(), "plugin: regMr of " + std::to_string(size) + " bytes: " + err.message());
  return r;
}

void deregisterMemory(Comm& comm, ofi::MemoryRegion* region) {
  if (region == nullptr || region == &emptyRegion) return;
  std::lock_guard<std::mutex> lock(comm.ep->mutex);
  void* addr = region->addr;
  const size_t bytes = region->bytes;
  comm.ep->mrCache().release(region);
  // NCCL may free the memory next; a cached registration would then outlive its pages.
  comm.ep->mrCache().invalidate(addr, bytes);
}

Request* isend(SendComm& comm, void* data, size_t size, int tag, ofi::MemoryRegion* mr) {
  if (!comm.connected) throw Error(Code::InvalidUsage, "plugin: isend on a comm that is not connected");
  Endpoint& ep = *comm.ep;
  checkSize(ep, size);
  std::lock_guard<std::mutex> lock(ep.mutex);
  Request* r = comm.pool.take();
  if (r == nullptr) {
    ep.progress();
    return nullptr;
  }
  r->reset(Request::Kind::Send, 1);
  r->comm = &comm;
  r->sizes[0] = size;
  const ssize_t rc = ep.send(*r, data, size, descOf(mr), comm.peer, dataTag(comm.remoteId, tag));
  if (rc == 0) return r;
  comm.pool.put(r);
  if (rc == -FI_EAGAIN) {
    DeviceCounters::add(deviceCounters(ep.deviceIndex()).retries);
    ep.progress();
    return nullptr;
  }
  throw Error(Code::SystemError, "plugin: " + ofi::fiErrorMessage("fi_tsend", int(rc)));
}

Request* irecv(RecvComm& comm, int n, void** data, const size_t* sizes, const int* tags,
               ofi::MemoryRegion* const* mrs) {
  if (n < 1 || n > kMaxRecvs) {
    throw Error(Code::InvalidArgument, "plugin: irecv of " + std::to_string(n) + " buffers (1.." +
                                           std::to_string(kMaxRecvs) + ")");
  }
  Endpoint& ep = *comm.ep;
  for (int i = 0; i < n; ++i) checkSize(ep, sizes[i]);
  std::lock_guard<std::mutex> lock(ep.mutex);
  // Receives are posted in call order (equal tags match in that order), so a partly posted one goes first.
  if (comm.partial != nullptr) postRest(comm);
  Request* r = comm.partial == nullptr ? comm.pool.take() : nullptr;
  if (r == nullptr) {
    ep.progress();
    return nullptr;
  }
  r->reset(Request::Kind::Recv, n);
  r->comm = &comm;
  for (int i = 0; i < n; ++i) {
    r->data[i] = data[i];
    r->sizes[i] = sizes[i];
    r->tags[i] = dataTag(comm.id, tags[i]);
    r->desc[i] = mrs != nullptr ? descOf(mrs[i]) : nullptr;
  }
  const ssize_t rc = ep.postRecv(*r);
  if (rc != 0) {
    comm.pool.put(r);
    if (rc == -FI_EAGAIN) {
      DeviceCounters::add(deviceCounters(ep.deviceIndex()).retries);
      ep.progress();
      return nullptr;
    }
    throw Error(Code::SystemError, "plugin: " + ofi::fiErrorMessage("fi_trecv", int(rc)));
  }
  comm.partial = r;
  postRest(comm);
  return r;
}

void test(Request* r, int* done, int* sizes) {
  if (r == nullptr || !r->inUse || r->comm == nullptr) {
    throw Error(Code::InvalidArgument, "plugin: test of a request that is not in flight");
  }
  Comm& comm = *r->comm;
  Endpoint& ep = *comm.ep;
  std::lock_guard<std::mutex> lock(ep.mutex);
  RequestPool* pool = nullptr;
  if (comm.kind == Comm::Kind::Recv) {
    auto& rc = static_cast<RecvComm&>(comm);
    if (rc.partial != nullptr) postRest(rc);
    pool = &rc.pool;
  } else {
    pool = &static_cast<SendComm&>(comm).pool;
  }
  if (!r->finished()) ep.progress();
  if (!r->finished()) {
    *done = 0;
    return;
  }
  *done = 1;
  const abi::Result error = r->error;
  if (sizes != nullptr) {
    for (int i = 0; i < r->n; ++i) sizes[i] = int(r->sizes[i]);
  }
  const bool recv = r->kind == Request::Kind::Recv;
  DeviceCounters& counters = deviceCounters(ep.deviceIndex());
  if (error != abi::kSuccess) {
    DeviceCounters::add(counters.errors);
  } else {
    uint64_t bytes = 0;
    for (int i = 0; i < r->n; ++i) bytes += r->sizes[i];
    DeviceCounters::add(recv ? counters.receivedBytes : counters.sentBytes, bytes);
    DeviceCounters::add(recv ? counters.receivedMessages : counters.sentMessages, uint64_t(r->n));
  }
  pool->put(r);
  if (error != abi::kSuccess) {
    throw Error(static_cast<Code>(error), std::string("plugin: a ") + (recv ? "receive" : "send") + " on device " +
                                              std::to_string(ep.deviceIndex()) + " failed (see the warning above)");
  }
}

}  // namespace conflux::plugin
