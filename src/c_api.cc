// The C ABI boundary: every exported function converts exceptions and Status into cfxResult_t in one place
// (guarded, c_api_shared.h) and records the message as the calling thread's last error. The calls on a
// communicator are here; making and ending communicators is in c_api_comm.cc.
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "conflux/conflux.h"
#include "core/error.h"
#include "core/log.h"
#include "src/c_api_shared.h"
#include "src/communicator.h"
#include "src/device_memory.h"
#include "src/group.h"
#include "src/validate.h"
#include "src/vector_collectives.h"
#include "transport/shm/shared_memory.h"

namespace conflux::capi {

std::string& lastError() {
  thread_local std::string message;
  return message;
}

cfxResult_t record(const char* fn, const Status& s, const cfxComm* comm) {
  if (s.isOk()) return cfxSuccess;
  lastError() = std::string(fn);
  if (comm != nullptr && comm->impl && !comm->impl->name().empty()) lastError() += " [comm " + comm->impl->name() + "]";
  lastError() += ": " + s.message();
  CFX_LOG(Info, kAll, "%s", lastError().c_str());
  return static_cast<cfxResult_t>(s.code());
}

}  // namespace conflux::capi

namespace conflux {
namespace {

using namespace capi;

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

/// The live cfxRedOpCreatePreMulSum op of `comm` with handle `op`, or null; call with comm->opsMutex held.
PremulOp* livePremul(cfxComm_t comm, int op) {
  const size_t slot = static_cast<size_t>(op) - cfxNumOps;
  if (op < cfxNumOps || slot >= comm->premulOps.size() || !comm->premulOps[slot].inUse) return nullptr;
  return &comm->premulOps[slot];
}

/// A PreMulSum handle of `comm` (op >= cfxNumOps) into a.op and a's scalar; checks it matches dtype.
Status resolvePremul(cfxComm_t comm, int op, int dtype, CallArgs& a) {
  std::lock_guard<std::mutex> lock(comm->opsMutex);
  const PremulOp* live = livePremul(comm, op);
  if (live == nullptr) {
    return Status(Code::InvalidArgument, "op: " + std::to_string(op) + " is neither a built-in cfxRedOp_t (0.." +
                                             std::to_string(cfxNumOps - 1) +
                                             ") nor a live cfxRedOpCreatePreMulSum op of this communicator");
  }
  const PremulOp& p = *live;
  if (static_cast<int>(p.dtype) != dtype) {
    return Status(Code::InvalidArgument, "op: the pre-multiplied sum was created for " + std::string(dataTypeName(p.dtype)) +
                                             ", but datatype is " +
                                             std::string(dataTypeName(static_cast<DataType>(dtype))));
  }
  a.op = RedOp::PreMulSum;
  a.scalarBits = p.bits;
  a.scalarPtr = p.ptr;
  return Status::ok();
}

cfxResult_t collective(const char* fn, CallArgs a, int dtype, int op, bool needsOp, cfxComm_t comm,
                       cfxStream_t stream) {
  return guarded(fn, [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    const bool premul = needsOp && op >= cfxNumOps;
    if (Status s = validateEnums(dtype, premul ? 0 : op, needsOp); !s) return s;
    if (premul) {
      if (Status s = resolvePremul(comm, op, dtype, a); !s) return s;
    }
    if (Status s = checkStream(stream, stream != nullptr && (placeOf(a.send).space == MemSpace::Cuda ||
                                                             placeOf(a.recv).space == MemSpace::Cuda));
        !s) {
      return s;
    }
    a.stream = stream;
    a.dtype = static_cast<DataType>(dtype);
    if (!premul) a.op = needsOp ? static_cast<RedOp>(op) : RedOp::Sum;
    if (Status s = validateCollective(a, comm->impl->rank(), comm->impl->nranks()); !s) return s;
    if (group::active()) {
      group::enqueue(comm->impl.get(), a);
      return Status::ok();
    }
    return comm->impl->run(a);
  }, comm);
}

/// Gather, scatter and all-to-all-v: a batch of sends and receives (src/vector_collectives.h).
template <class MakeOps>
cfxResult_t vectorCollective(const char* fn, VectorCall c, int dtype, cfxComm_t comm, cfxStream_t stream,
                             MakeOps&& makeOps) {
  return guarded(fn, [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (Status s = validateEnums(dtype, 0, false); !s) return s;
    c.dtype = static_cast<DataType>(dtype);
    c.stream = stream;
    std::vector<P2pOp> ops;
    if (Status s = makeOps(c, comm->impl->rank(), comm->impl->nranks(), ops); !s) return s;
    bool device = false;
    for (const P2pOp& op : ops) device |= placeOf(op.buf).space == MemSpace::Cuda;
    if (Status s = checkStream(stream, stream != nullptr && device); !s) return s;
    if (group::active()) {
      for (const P2pOp& op : ops) group::enqueue(comm->impl.get(), op);
      return Status::ok();
    }
    return comm->impl->runP2p(ops);
  }, comm);
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
  }, comm);
}

}  // namespace
}  // namespace conflux

using namespace conflux;
using namespace conflux::capi;

extern "C" {

cfxResult_t cfxGetVersion(int* version) {
  return guarded("cfxGetVersion", [&]() -> Status {
    if (version == nullptr) return Status(Code::InvalidArgument, "version is NULL");
    *version = CFX_VERSION_CODE;
    return Status::ok();
  });
}

cfxResult_t cfxGetFeatures(unsigned int* features) {
  return guarded("cfxGetFeatures", [&]() -> Status {
    if (features == nullptr) return Status(Code::InvalidArgument, "features is NULL");
    *features = (CONFLUX_HAVE_CUDA ? CFX_FEATURE_CUDA : 0u) | (CONFLUX_C_API_HAVE_OFI ? CFX_FEATURE_OFI : 0u);
    return Status::ok();
  });
}

cfxResult_t cfxRedOpCreatePreMulSum(cfxRedOp_t* op, void* scalar, cfxDataType_t datatype,
                                    cfxScalarResidence_t residence, cfxComm_t comm) {
  // The enums as the caller's bits: a value outside the enum is an argument error, not one to load as one.
  const int dtype = rawEnum(datatype), where = rawEnum(residence);
  return guarded("cfxRedOpCreatePreMulSum", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (op == nullptr) return Status(Code::InvalidArgument, "op is NULL");
    if (scalar == nullptr) return Status(Code::InvalidArgument, "scalar is NULL");
    if (Status s = validateEnums(dtype, 0, false); !s) return s;
    if (where != cfxScalarDevice && where != cfxScalarHostImmediate) {
      return Status(Code::InvalidArgument, "residence: " + std::to_string(where) + " is not a cfxScalarResidence_t");
    }
    PremulOp p;
    p.inUse = true;
    p.dtype = static_cast<DataType>(dtype);
    if (where == cfxScalarHostImmediate) {
      std::memcpy(&p.bits, scalar, dataTypeSize(p.dtype));
    } else {
      p.ptr = scalar;
    }
    std::lock_guard<std::mutex> lock(comm->opsMutex);
    size_t slot = 0;
    while (slot < comm->premulOps.size() && comm->premulOps[slot].inUse) ++slot;
    if (slot >= static_cast<size_t>(cfxMaxRedOp) - cfxNumOps) return Status(Code::InvalidUsage, "too many live ops");
    if (slot == comm->premulOps.size()) comm->premulOps.push_back(p);
    else comm->premulOps[slot] = p;
    *op = static_cast<cfxRedOp_t>(cfxNumOps + static_cast<int>(slot));
    return Status::ok();
  }, comm);
}

cfxResult_t cfxRedOpDestroy(cfxRedOp_t op, cfxComm_t comm) {
  return guarded("cfxRedOpDestroy", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    std::lock_guard<std::mutex> lock(comm->opsMutex);
    const int v = rawEnum(op);
    PremulOp* live = livePremul(comm, v);
    if (live == nullptr) {
      return Status(Code::InvalidArgument, "op: " + std::to_string(v) +
                                               " is not a live cfxRedOpCreatePreMulSum op of this communicator");
    }
    *live = PremulOp{};
    return Status::ok();
  }, comm);
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

cfxResult_t cfxAllReduce(const void* sendbuff, void* recvbuff, size_t count, cfxDataType_t datatype,
                         cfxRedOp_t op, cfxComm_t comm, cfxStream_t stream) {
  CallArgs a{Collective::AllReduce, sendbuff, recvbuff, count};
  return collective("cfxAllReduce", a, rawEnum(datatype), rawEnum(op), true, comm, stream);
}

cfxResult_t cfxReduce(const void* sendbuff, void* recvbuff, size_t count, cfxDataType_t datatype, cfxRedOp_t op,
                      int root, cfxComm_t comm, cfxStream_t stream) {
  CallArgs a{Collective::Reduce, sendbuff, recvbuff, count};
  a.root = root;
  return collective("cfxReduce", a, rawEnum(datatype), rawEnum(op), true, comm, stream);
}

cfxResult_t cfxBroadcast(const void* sendbuff, void* recvbuff, size_t count, cfxDataType_t datatype, int root,
                         cfxComm_t comm, cfxStream_t stream) {
  CallArgs a{Collective::Broadcast, sendbuff, recvbuff, count};
  a.root = root;
  return collective("cfxBroadcast", a, rawEnum(datatype), 0, false, comm, stream);
}

cfxResult_t cfxAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, cfxDataType_t datatype,
                         cfxComm_t comm, cfxStream_t stream) {
  CallArgs a{Collective::AllGather, sendbuff, recvbuff, sendcount};
  return collective("cfxAllGather", a, rawEnum(datatype), 0, false, comm, stream);
}

cfxResult_t cfxReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, cfxDataType_t datatype,
                             cfxRedOp_t op, cfxComm_t comm, cfxStream_t stream) {
  CallArgs a{Collective::ReduceScatter, sendbuff, recvbuff, recvcount};
  return collective("cfxReduceScatter", a, rawEnum(datatype), rawEnum(op), true, comm, stream);
}

cfxResult_t cfxAllToAll(const void* sendbuff, void* recvbuff, size_t count, cfxDataType_t datatype,
                        cfxComm_t comm, cfxStream_t stream) {
  CallArgs a{Collective::AllToAll, sendbuff, recvbuff, count};
  return collective("cfxAllToAll", a, rawEnum(datatype), 0, false, comm, stream);
}

cfxResult_t cfxGather(const void* sendbuff, void* recvbuff, size_t sendcount, cfxDataType_t datatype, int root,
                      cfxComm_t comm, cfxStream_t stream) {
  return vectorCollective("cfxGather", VectorCall{sendbuff, recvbuff, DataType::Uint8, root, sendcount}, rawEnum(datatype),
                          comm, stream, gatherOps);
}

cfxResult_t cfxScatter(const void* sendbuff, void* recvbuff, size_t recvcount, cfxDataType_t datatype, int root,
                       cfxComm_t comm, cfxStream_t stream) {
  return vectorCollective("cfxScatter", VectorCall{sendbuff, recvbuff, DataType::Uint8, root, recvcount}, rawEnum(datatype),
                          comm, stream, scatterOps);
}

cfxResult_t cfxAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                         const size_t recvcounts[], const size_t rdispls[], cfxDataType_t datatype, cfxComm_t comm,
                         cfxStream_t stream) {
  VectorCall c;
  c.send = sendbuff;
  c.recv = recvbuff;
  c.sendCounts = sendcounts;
  c.sendDispls = sdispls;
  c.recvCounts = recvcounts;
  c.recvDispls = rdispls;
  return vectorCollective("cfxAllToAllv", c, rawEnum(datatype), comm, stream, allToAllvOps);
}

cfxResult_t cfxSend(const void* sendbuff, size_t count, cfxDataType_t datatype, int peer, cfxComm_t comm,
                    cfxStream_t stream) {
  return pointToPoint("cfxSend", true, sendbuff, count, rawEnum(datatype), peer, comm, stream);
}

cfxResult_t cfxRecv(void* recvbuff, size_t count, cfxDataType_t datatype, int peer, cfxComm_t comm,
                    cfxStream_t stream) {
  return pointToPoint("cfxRecv", false, recvbuff, count, rawEnum(datatype), peer, comm, stream);
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

const char* cfxGetLastError(cfxComm_t /*comm*/) { return lastError().c_str(); }

}  // extern "C"
