// The C ABI boundary: every exported function converts exceptions and Status into cfxResult_t in one place
// (guarded) and records the message as the calling thread's last error.
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "conflux/conflux.h"
#include "core/bootstrap/launcher_env.h"
#include "core/bootstrap/unique_id.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "src/communicator.h"
#include "src/device_memory.h"
#include "src/group.h"
#include "src/store_registry.h"
#include "src/validate.h"
#include "transport/shm/shared_memory.h"

namespace conflux {
/// One cfxCommRegister: the handle is the address of this record.
struct Registration {
  void* buff = nullptr;
  size_t size = 0;
};
}  // namespace conflux

struct cfxComm {
  std::unique_ptr<conflux::CommunicatorImpl> impl;
  std::mutex registrationsMutex;
  std::map<void*, std::unique_ptr<conflux::Registration>> registrations;  // by handle
};

namespace conflux {
namespace {

thread_local std::string tlsLastError;

cfxResult_t record(const char* fn, const Status& s) {
  if (s.isOk()) return cfxSuccess;
  tlsLastError = std::string(fn) + ": " + s.message();
  CFX_LOG(Info, kAll, "%s", tlsLastError.c_str());
  return static_cast<cfxResult_t>(s.code());
}

template <class F>
cfxResult_t guarded(const char* fn, F&& body) {
  try {
    return record(fn, body());
  } catch (const Error& e) {
    return record(fn, e.status());
  } catch (const std::bad_alloc&) {
    return record(fn, Status(Code::SystemError, "out of memory"));
  } catch (const std::exception& e) {
    return record(fn, Status(Code::InternalError, e.what()));
  }
}

Status checkComm(const cfxComm* comm) {
  if (comm == nullptr || !comm->impl) return Status(Code::InvalidArgument, "comm is NULL");
  return Status::ok();
}

/// A stream orders calls on device buffers; host buffers complete before the call returns and take none.
Status checkStream(cfxStream_t stream, bool touchesDevice) {
  if (stream != nullptr && !touchesDevice) {
#if CONFLUX_HAVE_CUDA
    return Status(Code::InvalidArgument, "stream: must be NULL for host buffers");
#else
    return Status(Code::InvalidArgument, "stream: must be NULL for host buffers (this build has no CUDA support)");
#endif
  }
  return Status::ok();
}

cfxResult_t collective(const char* fn, CallArgs a, int dtype, int op, bool needsOp, cfxComm_t comm,
                       cfxStream_t stream) {
  return guarded(fn, [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (Status s = validateEnums(dtype, op, needsOp); !s) return s;
    if (Status s = checkStream(stream, stream != nullptr && (placeOf(a.send).space == MemSpace::Cuda ||
                                                             placeOf(a.recv).space == MemSpace::Cuda));
        !s) {
      return s;
    }
    a.stream = stream;
    a.dtype = static_cast<DataType>(dtype);
    a.op = needsOp ? static_cast<RedOp>(op) : RedOp::Sum;
    if (Status s = validateCollective(a, comm->impl->rank(), comm->impl->nranks()); !s) return s;
    if (group::active()) {
      group::enqueue(comm->impl.get(), a);
      return Status::ok();
    }
    return comm->impl->run(a);
  });
}

cfxResult_t pointToPoint(const char* fn, bool isSend, const void* buf, size_t count, int dtype, int peer,
                         cfxComm_t comm, cfxStream_t stream) {
  return guarded(fn, [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (Status s = checkStream(stream, stream != nullptr && placeOf(buf).space == MemSpace::Cuda); !s) return s;
    if (Status s = validateP2p(buf, count, dtype, peer, comm->impl->nranks(), isSend ? "sendbuff" : "recvbuff"); !s) {
      return s;
    }
    P2pOp op{isSend, buf, count * dataTypeSize(static_cast<DataType>(dtype)), peer, stream};
    if (group::active()) {
      group::enqueue(comm->impl.get(), op);
      return Status::ok();
    }
    return comm->impl->runP2p({op});
  });
}

}  // namespace
}  // namespace conflux

using namespace conflux;

extern "C" {

cfxResult_t cfxGetVersion(int* version) {
  return guarded("cfxGetVersion", [&]() -> Status {
    if (version == nullptr) return Status(Code::InvalidArgument, "version is NULL");
    *version = CFX_VERSION_CODE;
    return Status::ok();
  });
}

cfxResult_t cfxGetUniqueId(cfxUniqueId* uniqueId) {
  return guarded("cfxGetUniqueId", [&]() -> Status {
    if (uniqueId == nullptr) return Status(Code::InvalidArgument, "uniqueId is NULL");
    *uniqueId = bootstrap::encode(startRendezvous());
    return Status::ok();
  });
}

cfxResult_t cfxCommInitRank(cfxComm_t* comm, int nranks, cfxUniqueId commId, int rank) {
  if (comm != nullptr) *comm = nullptr;
  return guarded("cfxCommInitRank", [&]() -> Status {
    if (comm == nullptr) return Status(Code::InvalidArgument, "comm is NULL");
    if (nranks < 1) return Status(Code::InvalidArgument, "nranks: " + std::to_string(nranks) + " must be >= 1");
    if (rank < 0 || rank >= nranks) {
      return Status(Code::InvalidArgument, "rank: " + std::to_string(rank) + " is not in [0, " + std::to_string(nranks) + ")");
    }
    bootstrap::UniqueId id = bootstrap::decode(commId);
    auto c = std::make_unique<cfxComm>();
    c->impl = CommunicatorImpl::create(id, nranks, rank, claimRendezvous(id));
    *comm = c.release();
    return Status::ok();
  });
}

cfxResult_t cfxCommInitFromEnv(cfxComm_t* comm) {
  if (comm != nullptr) *comm = nullptr;
  return guarded("cfxCommInitFromEnv", [&]() -> Status {
    if (comm == nullptr) return Status(Code::InvalidArgument, "comm is NULL");
    auto timeout = std::chrono::milliseconds(config::getInt(config::Var::TIMEOUT_MS));
    bootstrap::EnvBootstrap env = bootstrap::resolveFromEnvironment(bootstrap::defaultEnvLookup(), timeout);
    CFX_INFO(kInit, "launcher environment: %s, rank %d of %d", env.source.c_str(), env.rank, env.nranks);
    auto impl = CommunicatorImpl::create(env.id, env.nranks, env.rank, env.server);
    env.finish();
    auto c = std::make_unique<cfxComm>();
    c->impl = std::move(impl);
    *comm = c.release();
    return Status::ok();
  });
}

cfxResult_t cfxCommDestroy(cfxComm_t comm) {
  return guarded("cfxCommDestroy", [&]() -> Status {
    if (comm == nullptr) return Status(Code::InvalidArgument, "comm is NULL");
    group::forget(comm->impl.get());
    delete comm;
    return Status::ok();
  });
}

cfxResult_t cfxMemAlloc(void** ptr, size_t size) {
  return guarded("cfxMemAlloc", [&]() -> Status {
    if (ptr == nullptr) return Status(Code::InvalidArgument, "ptr is NULL");
    *ptr = nullptr;
    if (size == 0) return Status(Code::InvalidArgument, "size must be > 0");
    *ptr = shm::sharedAlloc(size);
    return Status::ok();
  });
}

cfxResult_t cfxMemFree(void* ptr) {
  return guarded("cfxMemFree", [&]() -> Status {
    if (ptr == nullptr) return Status::ok();
    if (!shm::sharedFree(ptr)) return Status(Code::InvalidArgument, "ptr was not returned by cfxMemAlloc");
    return Status::ok();
  });
}

cfxResult_t cfxCommRegister(const cfxComm_t comm, void* buff, size_t size, void** handle) {
  return guarded("cfxCommRegister", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (handle == nullptr) return Status(Code::InvalidArgument, "handle is NULL");
    *handle = nullptr;
    if (buff == nullptr) return Status(Code::InvalidArgument, "buff is NULL");
    if (size == 0) return Status(Code::InvalidArgument, "size must be > 0");
    auto reg = std::make_unique<Registration>(Registration{buff, size});
    if (!shm::findShared(buff, size)) {
      CFX_INFO(kColl, "cfxCommRegister: %zu bytes at %p are not from cfxMemAlloc: they will be staged", size, buff);
    }
    std::lock_guard<std::mutex> lock(comm->registrationsMutex);
    *handle = reg.get();
    comm->registrations.emplace(reg.get(), std::move(reg));
    return Status::ok();
  });
}

cfxResult_t cfxCommDeregister(const cfxComm_t comm, void* handle) {
  return guarded("cfxCommDeregister", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    std::lock_guard<std::mutex> lock(comm->registrationsMutex);
    if (comm->registrations.erase(handle) == 0) {
      return Status(Code::InvalidArgument, "handle is not a registration of this communicator");
    }
    return Status::ok();
  });
}

cfxResult_t cfxCommAbort(cfxComm_t comm) {
  return guarded("cfxCommAbort", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    comm->impl->abort();
    return Status::ok();
  });
}

cfxResult_t cfxCommGetAsyncError(cfxComm_t comm, cfxResult_t* asyncError) {
  return guarded("cfxCommGetAsyncError", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (asyncError == nullptr) return Status(Code::InvalidArgument, "asyncError is NULL");
    Status e = comm->impl->asyncError();
    *asyncError = static_cast<cfxResult_t>(e.code());
    if (!e.isOk()) tlsLastError = "cfxCommGetAsyncError: " + e.message();
    return Status::ok();
  });
}

cfxResult_t cfxCommCount(const cfxComm_t comm, int* count) {
  return guarded("cfxCommCount", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (count == nullptr) return Status(Code::InvalidArgument, "count is NULL");
    *count = comm->impl->nranks();
    return Status::ok();
  });
}

cfxResult_t cfxCommUserRank(const cfxComm_t comm, int* rank) {
  return guarded("cfxCommUserRank", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (rank == nullptr) return Status(Code::InvalidArgument, "rank is NULL");
    *rank = comm->impl->rank();
    return Status::ok();
  });
}

cfxResult_t cfxCommLocalRank(const cfxComm_t comm, int* localRank, int* localSize) {
  return guarded("cfxCommLocalRank", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (localRank == nullptr) return Status(Code::InvalidArgument, "localRank is NULL");
    if (localSize == nullptr) return Status(Code::InvalidArgument, "localSize is NULL");
    *localRank = comm->impl->localRank();
    *localSize = comm->impl->localSize();
    return Status::ok();
  });
}

cfxResult_t cfxAllReduce(const void* sendbuff, void* recvbuff, size_t count, cfxDataType_t datatype,
                         cfxRedOp_t op, cfxComm_t comm, cfxStream_t stream) {
  CallArgs a{Collective::AllReduce, sendbuff, recvbuff, count};
  return collective("cfxAllReduce", a, datatype, op, true, comm, stream);
}

cfxResult_t cfxReduce(const void* sendbuff, void* recvbuff, size_t count, cfxDataType_t datatype, cfxRedOp_t op,
                      int root, cfxComm_t comm, cfxStream_t stream) {
  CallArgs a{Collective::Reduce, sendbuff, recvbuff, count};
  a.root = root;
  return collective("cfxReduce", a, datatype, op, true, comm, stream);
}

cfxResult_t cfxBroadcast(const void* sendbuff, void* recvbuff, size_t count, cfxDataType_t datatype, int root,
                         cfxComm_t comm, cfxStream_t stream) {
  CallArgs a{Collective::Broadcast, sendbuff, recvbuff, count};
  a.root = root;
  return collective("cfxBroadcast", a, datatype, 0, false, comm, stream);
}

cfxResult_t cfxAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, cfxDataType_t datatype,
                         cfxComm_t comm, cfxStream_t stream) {
  CallArgs a{Collective::AllGather, sendbuff, recvbuff, sendcount};
  return collective("cfxAllGather", a, datatype, 0, false, comm, stream);
}

cfxResult_t cfxReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, cfxDataType_t datatype,
                             cfxRedOp_t op, cfxComm_t comm, cfxStream_t stream) {
  CallArgs a{Collective::ReduceScatter, sendbuff, recvbuff, recvcount};
  return collective("cfxReduceScatter", a, datatype, op, true, comm, stream);
}

cfxResult_t cfxAllToAll(const void* sendbuff, void* recvbuff, size_t count, cfxDataType_t datatype,
                        cfxComm_t comm, cfxStream_t stream) {
  CallArgs a{Collective::AllToAll, sendbuff, recvbuff, count};
  return collective("cfxAllToAll", a, datatype, 0, false, comm, stream);
}

cfxResult_t cfxSend(const void* sendbuff, size_t count, cfxDataType_t datatype, int peer, cfxComm_t comm,
                    cfxStream_t stream) {
  return pointToPoint("cfxSend", true, sendbuff, count, datatype, peer, comm, stream);
}

cfxResult_t cfxRecv(void* recvbuff, size_t count, cfxDataType_t datatype, int peer, cfxComm_t comm,
                    cfxStream_t stream) {
  return pointToPoint("cfxRecv", false, recvbuff, count, datatype, peer, comm, stream);
}

cfxResult_t cfxGroupStart(void) {
  return guarded("cfxGroupStart", []() -> Status {
    group::start();
    return Status::ok();
  });
}

cfxResult_t cfxGroupEnd(void) {
  return guarded("cfxGroupEnd", []() -> Status { return group::end(); });
}

const char* cfxGetErrorString(cfxResult_t result) {
  if (result < 0 || result >= cfxNumResults) return "unknown result code";
  return codeName(static_cast<Code>(result));
}

const char* cfxGetLastError(cfxComm_t /*comm*/) { return tlsLastError.c_str(); }

}  // extern "C"
