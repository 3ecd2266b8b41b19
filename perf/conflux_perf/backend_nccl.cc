// conflux-perf: the NCCL backend (a baseline on CUDA device buffers), loaded at run time with dlopen so
// that building conflux-perf needs no NCCL: the library is CONFLUX_PERF_NCCL_LIB when set, else
// libnccl.so.2 through the loader's search path. The declarations below are our own, written from
// NCCL's documented C ABI: ncclResult_t, ncclDataType_t and ncclRedOp_t are ints (0 is success; the
// datatype and op numbers equal Conflux's), ncclComm_t an opaque pointer, ncclUniqueId 128 bytes passed
// by value, cudaStream_t a pointer.
//
// Mapping: ncclAllReduce, ncclAllGather, ncclReduceScatter, ncclBroadcast, ncclReduce; all-to-all is one
// ncclSend and one ncclRecv per peer inside ncclGroupStart/ncclGroupEnd (as nccl-tests does); send/recv
// is ncclSend to rank+1 and ncclRecv from rank-1 in one group. In-place all-to-all and send/recv stage
// the input in a device scratch buffer on the stream first (part of the measured time, as for Conflux),
// since NCCL's grouped send and receive of one buffer would overwrite data not yet sent.
// Rank 0 makes the unique id and broadcasts it through the Conflux communicator the launcher built; the
// host helpers (barrier, statistics) run over that communicator too.
// NCCL refuses two ranks of one communicator on the same GPU (ncclInvalidUsage, "Duplicate GPU
// detected"), which is what several ranks on a one-GPU machine are. The ranks compare their GPUs first:
// --backend nccl then fails with a message saying so; --compare nccl leaves NCCL's columns N/A (with a
// note) so that Conflux's numbers still come out.
#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend.h"
#include "device_memory.h"
#include "sysinfo.h"

namespace cfxperf {

namespace {

struct NcclUniqueId {
  char internal[128];
};
using NcclComm = void*;
using NcclResult = int;
using Stream = void*;

constexpr const char* kLibraryVar = "CONFLUX_PERF_NCCL_LIB";
constexpr const char* kDefaultLibrary = "libnccl.so.2";

struct NcclApi {
  NcclResult (*getUniqueId)(NcclUniqueId*) = nullptr;
  NcclResult (*commInitRank)(NcclComm*, int, NcclUniqueId, int) = nullptr;
  NcclResult (*commDestroy)(NcclComm) = nullptr;
  const char* (*getErrorString)(NcclResult) = nullptr;
  const char* (*getLastError)(NcclComm) = nullptr;  // NCCL 2.13 and later; optional
  NcclResult (*getVersion)(int*) = nullptr;
  NcclResult (*allReduce)(const void*, void*, size_t, int, int, NcclComm, Stream) = nullptr;
  NcclResult (*allGather)(const void*, void*, size_t, int, NcclComm, Stream) = nullptr;
  NcclResult (*reduceScatter)(const void*, void*, size_t, int, int, NcclComm, Stream) = nullptr;
  NcclResult (*broadcast)(const void*, void*, size_t, int, int, NcclComm, Stream) = nullptr;
  NcclResult (*reduce)(const void*, void*, size_t, int, int, int, NcclComm, Stream) = nullptr;
  NcclResult (*send)(const void*, size_t, int, int, NcclComm, Stream) = nullptr;
  NcclResult (*recv)(void*, size_t, int, int, NcclComm, Stream) = nullptr;
  NcclResult (*groupStart)() = nullptr;
  NcclResult (*groupEnd)() = nullptr;
  std::string path;  ///< the file the loader opened
};

NcclApi& api() {
  static NcclApi instance;
  return instance;
}

// Where the library path came from, for the error messages.
std::string hint() {
  return std::getenv(kLibraryVar) != nullptr ? std::string(kLibraryVar) + " is set"
                                             : "set " + std::string(kLibraryVar) + " to the path of libnccl.so.2";
}

template <typename F>
bool find(void* handle, const char* symbol, F* fn, const std::string& path, std::string* error) {
  dlerror();
  void* p = dlsym(handle, symbol);
  if (p == nullptr) {
    const char* why = dlerror();
    *error = "the NCCL library '" + path + "' has no " + symbol + ": " + (why ? why : "null symbol") + " (" +
             hint() + ")";
    return false;
  }
  *fn = reinterpret_cast<F>(p);
  return true;
}

bool loadOnce(std::string* error) {
  const char* given = std::getenv(kLibraryVar);
  const std::string path = given != nullptr && *given != '\0' ? given : kDefaultLibrary;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    *error = "cannot load NCCL from '" + path + "': " + (why ? why : "unknown error") + " (" + hint() + ")";
    return false;
  }
  NcclApi a;
  const bool ok = find(handle, "ncclGetUniqueId", &a.getUniqueId, path, error) &&
                  find(handle, "ncclCommInitRank", &a.commInitRank, path, error) &&
                  find(handle, "ncclCommDestroy", &a.commDestroy, path, error) &&
                  find(handle, "ncclGetErrorString", &a.getErrorString, path, error) &&
                  find(handle, "ncclGetVersion", &a.getVersion, path, error) &&
                  find(handle, "ncclAllReduce", &a.allReduce, path, error) &&
                  find(handle, "ncclAllGather", &a.allGather, path, error) &&
                  find(handle, "ncclReduceScatter", &a.reduceScatter, path, error) &&
                  find(handle, "ncclBroadcast", &a.broadcast, path, error) &&
                  find(handle, "ncclReduce", &a.reduce, path, error) &&
                  find(handle, "ncclSend", &a.send, path, error) &&
                  find(handle, "ncclRecv", &a.recv, path, error) &&
                  find(handle, "ncclGroupStart", &a.groupStart, path, error) &&
                  find(handle, "ncclGroupEnd", &a.groupEnd, path, error);
  if (!ok) {
    dlclose(handle);
    return false;
  }
  std::string ignored;
  if (!find(handle, "ncclGetLastError", &a.getLastError, path, &ignored)) a.getLastError = nullptr;
  link_map* map = nullptr;
  a.path = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name && *map->l_name
               ? map->l_name
               : path;
  api() = a;  // the handle stays open for the life of the process
  return true;
}

// "2.27.7" from ncclGetVersion's code (major*10000 + minor*100 + patch since 2.9, major*1000 before).
std::string versionText(int code) {
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
  const int patch = code % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

class NcclBackend final : public Backend {
 public:
  NcclBackend(cfxComm_t comm, bool comparison) : comm_(comm), ownsComm_(!comparison) {
    try {
      if (!gpusDistinct(&unusable_) && !comparison) throw std::runtime_error(unusable_);
      if (unusable_.empty()) init();
    } catch (...) {
      if (ownsComm_) cfxCommDestroy(comm_);
      throw;
    }
  }
  ~NcclBackend() override {
    if (nccl_ != nullptr) api().commDestroy(nccl_);
    if (ownsComm_) cfxCommDestroy(comm_);
  }
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  const char* name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }

  std::string version() const override {
    std::string error;
    if (!ncclLoad(&error)) return "";
    int code = 0;
    if (api().getVersion(&code) != 0) return "unknown (" + api().path + ")";
    return versionText(code) + " (" + api().path + ")";
  }

  bool supports(Coll, cfxDataType_t, cfxRedOp_t, size_t, std::string* why) const override {
    if (!unusable_.empty()) {
      *why = unusable_;
      return false;
    }
    if (memory_ != Memory::Cuda) {
      *why = "NCCL needs CUDA device buffers (--memory cuda)";
      return false;
    }
    return true;
  }

  void run(Coll coll, const void* send, void* recv, size_t count, cfxDataType_t type, cfxRedOp_t op,
           int root) override {
    if (memory_ != Memory::Cuda) throw std::runtime_error("the nccl backend needs CUDA device buffers (--memory cuda)");
    const NcclApi& a = api();
    const int dt = static_cast<int>(type);  // ncclInt8 = 0 ... ncclBfloat16 = 9, as cfxDataType_t
    const int rop = static_cast<int>(op);   // ncclSum = 0, ncclProd, ncclMax, ncclMin, ncclAvg = 4, as cfxRedOp_t
    if (rop > static_cast<int>(cfxAvg)) throw std::runtime_error("the nccl backend has no bitwise reductions");
    const size_t elt = typeSize(type);
    switch (coll) {
      case Coll::AllReduce:
        check(a.allReduce(send, recv, count, dt, rop, nccl_, stream_), "ncclAllReduce");
        break;
      case Coll::AllGather:
        check(a.allGather(send, recv, count, dt, nccl_, stream_), "ncclAllGather");
        break;
      case Coll::ReduceScatter:
        check(a.reduceScatter(send, recv, count, dt, rop, nccl_, stream_), "ncclReduceScatter");
        break;
      case Coll::Broadcast:
        check(a.broadcast(send, recv, count, dt, root, nccl_, stream_), "ncclBroadcast");
        break;
      case Coll::Reduce:
        check(a.reduce(send, recv, count, dt, rop, root, nccl_, stream_), "ncclReduce");
        break;
      case Coll::AllToAll: {
        const size_t block = count * elt;
        if (send == recv) send = stage(send, block * static_cast<size_t>(nranks_));
        const char* from = static_cast<const char*>(send);
        char* to = static_cast<char*>(recv);
        check(a.groupStart(), "ncclGroupStart");
        NcclResult first = 0;
        for (int peer = 0; peer < nranks_ && first == 0; ++peer) {
          const size_t at = static_cast<size_t>(peer) * block;
          first = a.send(from + at, count, dt, peer, nccl_, stream_);
          if (first == 0) first = a.recv(to + at, count, dt, peer, nccl_, stream_);
        }
        const NcclResult end = a.groupEnd();
        check(first, "ncclSend/ncclRecv (all-to-all)");
        check(end, "ncclGroupEnd (all-to-all)");
        break;
      }
      case Coll::SendRecv: {
        if (send == recv) send = stage(send, count * elt);
        const int next = (rank_ + 1) % nranks_;
        const int prev = (rank_ - 1 + nranks_) % nranks_;
        check(a.groupStart(), "ncclGroupStart");
        const NcclResult s = a.send(send, count, dt, next, nccl_, stream_);
        const NcclResult r = a.recv(recv, count, dt, prev, nccl_, stream_);
        const NcclResult e = a.groupEnd();
        check(s, "ncclSend");
        check(r, "ncclRecv");
        check(e, "ncclGroupEnd (send/recv)");
        break;
      }
    }
  }

  void groupStart() override { check(api().groupStart(), "ncclGroupStart"); }
  void groupEnd() override { check(api().groupEnd(), "ncclGroupEnd"); }

  void barrier() override { confluxBarrier(comm_); }
  void allreduce(double* values, int n, Combine how) override { confluxAllreduce(comm_, values, n, how); }
  void allgather(const void* mine, void* all, size_t bytes) override { confluxAllgather(comm_, mine, all, bytes); }

 private:
  // False, with *why, when two ranks on one host use the same GPU (the launcher chose the devices).
  bool gpusDistinct(std::string* why) {
    struct Gpu {
      char host[112];
      char busId[16];
    } mine{};
    std::string name, bus;
    int index = 0;
    describeDevice(&index, &name, &bus);
    std::snprintf(mine.host, sizeof mine.host, "%s", hostName().c_str());
    std::snprintf(mine.busId, sizeof mine.busId, "%s", bus.c_str());
    int rank = 0, n = 1;
    cfxCommUserRank(comm_, &rank);
    cfxCommCount(comm_, &n);
    std::vector<Gpu> all(static_cast<size_t>(n));
    confluxAllgather(comm_, &mine, all.data(), sizeof mine);
    for (size_t i = 0; i < all.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (std::strcmp(all[i].host, all[j].host) == 0 && std::strcmp(all[i].busId, all[j].busId) == 0) {
          *why = "NCCL needs one GPU per rank, and ranks " + std::to_string(j) + " and " + std::to_string(i) +
                 " share GPU " + all[i].busId + " on " + all[i].host + " (start at most as many ranks as GPUs)";
          return false;
        }
      }
    }
    return true;
  }

  void init() {
    if (cfxCommUserRank(comm_, &rank_) != cfxSuccess || cfxCommCount(comm_, &nranks_) != cfxSuccess) {
      throw std::runtime_error(std::string("cfxCommUserRank/cfxCommCount failed: ") + cfxGetLastError(comm_));
    }
    std::string error;
    if (!ncclLoad(&error)) throw std::runtime_error(error);
    // Rank 0's id and whether it got one, to every rank over the Conflux communicator (host memory).
    struct IdMessage {
      int32_t result;
      NcclUniqueId id;
    } mine{}, got{};
    if (rank_ == 0) mine.result = api().getUniqueId(&mine.id);
    if (cfxBroadcast(&mine, &got, sizeof got, cfxInt8, 0, comm_, nullptr) != cfxSuccess) {
      throw std::runtime_error(std::string("cfxBroadcast of the NCCL unique id failed: ") + cfxGetLastError(comm_));
    }
    if (got.result != 0) {
      throw std::runtime_error(std::string("ncclGetUniqueId failed on rank 0: ") + api().getErrorString(got.result));
    }
    NcclComm nccl = nullptr;
    check(api().commInitRank(&nccl, nranks_, got.id, rank_), "ncclCommInitRank");
    nccl_ = nccl;
  }

  void check(NcclResult result, const char* what) const {
    if (result == 0) return;
    std::string text = std::string(what) + " failed: " + api().getErrorString(result);
    if (api().getLastError != nullptr) {
      const char* last = api().getLastError(nccl_);
      if (last != nullptr && *last != '\0') text += std::string(": ") + last;
    }
    throw std::runtime_error(text);
  }

  const void* stage(const void* data, size_t bytes) {
    scratch_.reserve(bytes);
    copyOnDeviceAsync(scratch_.get(), data, bytes, stream_);
    return scratch_.get();
  }

  cfxComm_t comm_;
  bool ownsComm_;
  NcclComm nccl_ = nullptr;
  int rank_ = 0;
  int nranks_ = 1;
  DeviceMemory scratch_;
  std::string unusable_;  ///< why NCCL cannot run here (--compare nccl only); empty when it can
};

}  // namespace

bool ncclLoad(std::string* error) {
  static bool loaded = false;
  static std::string failure;
  if (!loaded && failure.empty()) {
    loaded = loadOnce(&failure);
    if (!loaded && failure.empty()) failure = "cannot load NCCL";
  }
  if (!loaded) *error = failure;
  return loaded;
}

std::unique_ptr<Backend> makeNcclBackend(cfxComm_t comm, bool comparison) {
  return std::make_unique<NcclBackend>(comm, comparison);
}

}  // namespace cfxperf
