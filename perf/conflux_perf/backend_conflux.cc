// conflux-perf: the Conflux backend (the library under test), through its public C API on host buffers,
// or on CUDA device buffers with the runner's stream passed to every call (--memory cuda).
// In-place all-to-all and send/recv: the API requires distinct buffers for these, so the in-place
// column stages the input in a scratch buffer first (the copy is part of the measured time), as an
// MPI_IN_PLACE implementation would; with device buffers the copy is a device copy on the stream.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend.h"
#include "device_memory.h"

namespace cfxperf {

namespace {

class ConfluxBackend final : public Backend {
 public:
  explicit ConfluxBackend(cfxComm_t comm) : comm_(comm) {
    check(cfxCommUserRank(comm_, &rank_), "cfxCommUserRank");
    check(cfxCommCount(comm_, &nranks_), "cfxCommCount");
  }
  ~ConfluxBackend() override { cfxCommDestroy(comm_); }
  ConfluxBackend(const ConfluxBackend&) = delete;
  ConfluxBackend& operator=(const ConfluxBackend&) = delete;

  const char* name() const override { return "conflux"; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }

  bool supports(Coll, cfxDataType_t, cfxRedOp_t, size_t, std::string*) const override { return true; }

  void* registerBuffer(void* p, size_t bytes) override {
    void* handle = nullptr;
    check(cfxCommRegister(comm_, p, bytes, &handle), "cfxCommRegister");
    return handle;
  }
  void deregisterBuffer(void* handle) override {
    if (handle != nullptr) cfxCommDeregister(comm_, handle);
  }

  void run(Coll coll, const void* send, void* recv, size_t count, cfxDataType_t type, cfxRedOp_t op,
           int root) override {
    const size_t elt = typeSize(type);
    switch (coll) {
      case Coll::AllReduce:
        check(cfxAllReduce(send, recv, count, type, op, comm_, stream_), "cfxAllReduce");
        break;
      case Coll::AllGather:
        check(cfxAllGather(send, recv, count, type, comm_, stream_), "cfxAllGather");
        break;
      case Coll::ReduceScatter:
        check(cfxReduceScatter(send, recv, count, type, op, comm_, stream_), "cfxReduceScatter");
        break;
      case Coll::Broadcast:
        check(cfxBroadcast(send, recv, count, type, root, comm_, stream_), "cfxBroadcast");
        break;
      case Coll::Reduce:
        check(cfxReduce(send, recv, count, type, op, root, comm_, stream_), "cfxReduce");
        break;
      case Coll::AllToAll:
        if (send == recv) send = stage(send, count * elt * static_cast<size_t>(nranks_));
        check(cfxAllToAll(send, recv, count, type, comm_, stream_), "cfxAllToAll");
        break;
      case Coll::SendRecv: {
        if (send == recv) send = stage(send, count * elt);
        const int next = (rank_ + 1) % nranks_;
        const int prev = (rank_ - 1 + nranks_) % nranks_;
        check(cfxGroupStart(), "cfxGroupStart");
        cfxResult_t s = cfxSend(send, count, type, next, comm_, stream_);
        cfxResult_t r = cfxRecv(recv, count, type, prev, comm_, stream_);
        cfxResult_t e = cfxGroupEnd();
        check(s, "cfxSend");
        check(r, "cfxRecv");
        check(e, "cfxGroupEnd (send/recv)");
        break;
      }
    }
  }

  void groupStart() override { check(cfxGroupStart(), "cfxGroupStart"); }
  void groupEnd() override { check(cfxGroupEnd(), "cfxGroupEnd"); }

  void barrier() override { confluxBarrier(comm_); }
  void allreduce(double* values, int n, Combine how) override { confluxAllreduce(comm_, values, n, how); }
  void allgather(const void* mine, void* all, size_t bytes) override { confluxAllgather(comm_, mine, all, bytes); }

 private:
  void check(cfxResult_t result, const char* what) const {
    if (result != cfxSuccess) {
      throw std::runtime_error(std::string(what) + " failed: " + cfxGetErrorString(result) + ": " +
                               cfxGetLastError(comm_));
    }
  }

  const void* stage(const void* data, size_t bytes) {
    if (memory_ == Memory::Cuda) {
      deviceScratch_.reserve(bytes);
      copyOnDeviceAsync(deviceScratch_.get(), data, bytes, stream_);
      return deviceScratch_.get();
    }
    // Page-aligned like the runner's buffers: a malloc'd scratch starts 16 bytes into a page, where
    // glibc's memcpy from a page-aligned buffer runs at a tenth of its speed (core/copy_bytes.h) and the
    // in-place column measured that instead of the library.
    if (scratchBytes_ < bytes) {
      scratch_.reset(static_cast<char*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)));
      if (!scratch_) throw std::runtime_error("out of memory for the in-place staging buffer");
      scratchBytes_ = bytes;
    }
    if (bytes > 0) std::memcpy(scratch_.get(), data, bytes);
    return scratch_.get();
  }

  cfxComm_t comm_;
  int rank_ = 0;
  int nranks_ = 1;
  std::unique_ptr<char, decltype(&std::free)> scratch_{nullptr, &std::free};
  size_t scratchBytes_ = 0;
  DeviceMemory deviceScratch_;
};

void check(cfxResult_t result, cfxComm_t comm, const char* what) {
  if (result != cfxSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + cfxGetErrorString(result) + ": " +
                             cfxGetLastError(comm));
  }
}

}  // namespace

void confluxBarrier(cfxComm_t comm) {
  float one = 1, sum = 0;
  check(cfxAllReduce(&one, &sum, 1, cfxFloat32, cfxSum, comm, nullptr), comm, "cfxAllReduce (barrier)");
}

void confluxAllreduce(cfxComm_t comm, double* values, int n, Combine how) {
  std::vector<double> out(static_cast<size_t>(n));
  cfxRedOp_t op = how == Combine::Sum ? cfxSum : how == Combine::Min ? cfxMin : cfxMax;
  check(cfxAllReduce(values, out.data(), static_cast<size_t>(n), cfxFloat64, op, comm, nullptr), comm,
        "cfxAllReduce (statistics)");
  std::memcpy(values, out.data(), out.size() * sizeof(double));
}

void confluxAllgather(cfxComm_t comm, const void* mine, void* all, size_t bytes) {
  check(cfxAllGather(mine, all, bytes, cfxInt8, comm, nullptr), comm, "cfxAllGather (host)");
}

std::unique_ptr<Backend> makeConfluxBackend(cfxComm_t comm) { return std::make_unique<ConfluxBackend>(comm); }

}  // namespace cfxperf
