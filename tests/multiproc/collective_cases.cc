#include "tests/multiproc/collective_cases.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "tests/multiproc/reference.h"

#if CONFLUX_TEST_CUDA
#include <cuda_runtime_api.h>
#endif

namespace conflux::testing {
namespace {

constexpr uint8_t kSentinel = 0xA5;

// Inputs repeat with period 33 (reductions: lcm of 11 and 3) or 101 (data movement) in the element
// index, so a buffer is filled by computing one period and doubling it with memcpy. Keeps the reference
// cheap enough to check every element of million-element cases on 8 ranks sharing 2 cores.
constexpr uint64_t kPeriod = 33 * 101;

template <class F>
void fillPeriodic(std::byte* dst, uint64_t count, size_t elt, F&& element) {
  uint64_t first = std::min(count, kPeriod);
  for (uint64_t i = 0; i < first; ++i) element(i);
  for (uint64_t done = first; done < count;) {
    uint64_t n = std::min(done, count - done) / kPeriod * kPeriod;
    if (n == 0) n = std::min(kPeriod, count - done);
    std::memcpy(dst + done * elt, dst, n * elt);
    done += n;
  }
}

const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "allreduce";
    case Coll::Reduce: return "reduce";
    case Coll::Broadcast: return "broadcast";
    case Coll::AllGather: return "allgather";
    case Coll::ReduceScatter: return "reducescatter";
    case Coll::AllToAll: return "alltoall";
  }
  return "?";
}

bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }

struct Case {
  Coll coll;
  cfxDataType_t type;
  cfxRedOp_t op;
  uint64_t count;
  bool inPlace;
  int root;
};

class CaseRunner {
 public:
  CaseRunner(cfxComm_t comm) : comm_(comm) {
    cfxCommUserRank(comm, &rank_);
    cfxCommCount(comm, &n_);
  }

  ~CaseRunner() {
#if CONFLUX_TEST_CUDA
    if (dSend_) cudaFree(dSend_);
    if (dRecv_) cudaFree(dRecv_);
    if (stream_) cudaStreamDestroy(stream_);
#endif
  }
  CaseRunner(const CaseRunner&) = delete;
  CaseRunner& operator=(const CaseRunner&) = delete;

  void useSharedMemory(bool shared) { shared_ = shared; }
  /// Runs the calls on device copies of the buffers (CUDA builds); false when that is impossible.
  bool useDeviceMemory() {
#if CONFLUX_TEST_CUDA
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return false;
    if (cudaSetDevice(rank_ % devices) != cudaSuccess) return false;
    if (cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess) return false;
    device_ = true;
    return true;
#else
    return false;
#endif
  }

  // Returns true when the case passed.
  bool run(const Case& c) {
    const size_t elt = typeSize(c.type);
    const uint64_t n = static_cast<uint64_t>(n_);
    uint64_t sendCount = c.count, recvCount = c.count;
    if (c.coll == Coll::AllGather) recvCount = c.count * n;
    if (c.coll == Coll::ReduceScatter) sendCount = c.count * n;
    if (c.coll == Coll::AllToAll) sendCount = recvCount = c.count * n;
    const bool red = reduces(c.coll);

    // Buffers: in place, one buffer holds both as the collective defines.
    uint64_t bufCount = c.inPlace ? std::max(sendCount, recvCount) : sendCount;
    send_.assign(bufCount * elt + 1, std::byte{0}, shared_);
    recv_.assign(c.inPlace ? 1 : recvCount * elt + 1, std::byte{kSentinel}, shared_);
    std::byte* sendPtr = send_.data();
    std::byte* recvPtr = c.inPlace ? send_.data() : recv_.data();
    if (c.inPlace && c.coll == Coll::AllGather) sendPtr = send_.data() + rank_ * c.count * elt;
    if (c.inPlace && c.coll == Coll::ReduceScatter) recvPtr = send_.data() + rank_ * c.count * elt;
    if (c.inPlace && c.coll == Coll::AllGather) std::memset(send_.data(), kSentinel, send_.size());
    fillPeriodic(sendPtr, sendCount, elt,
                 [&](uint64_t i) { storeValue(c.type, sendPtr, i, inputValue(c.type, c.op, red, rank_, i)); });
    before_.assign(recvPtr, recvPtr + recvCount * elt);

    // A pre-multiplied sum: this rank's op, made for the case and released after it.
    op_ = c.op;
    if (c.op == kPreMulSumCase) {
      uint64_t scalar = 0;
      storeValue(c.type, &scalar, 0, premulScalar(rank_));
      if (cfxRedOpCreatePreMulSum(&op_, &scalar, c.type, cfxScalarHostImmediate, comm_) != cfxSuccess) {
        report(c, std::string("cfxRedOpCreatePreMulSum failed: ") + cfxGetLastError(comm_));
        return false;
      }
    }
    cfxResult_t r = device_ ? callOnDevice(c, sendPtr, recvPtr) : call(c, sendPtr, recvPtr, nullptr);
    if (c.op == kPreMulSumCase && cfxRedOpDestroy(op_, comm_) != cfxSuccess) {
      report(c, std::string("cfxRedOpDestroy failed: ") + cfxGetLastError(comm_));
      return false;
    }
    if (r != cfxSuccess) {
      report(c, "returned " + std::string(cfxGetErrorString(r)) + ": " + cfxGetLastError(comm_));
      return false;
    }
    expected(c, recvCount);
    const bool writes = !(c.coll == Coll::Reduce && rank_ != c.root);
    const std::byte* want = writes ? expect_.data() : before_.data();
    if (recvCount == 0 || std::memcmp(recvPtr, want, recvCount * elt) == 0) return true;
    int shown = 0;
    for (uint64_t i = 0; i < recvCount && shown < 3; ++i) {
      if (std::memcmp(recvPtr + i * elt, want + i * elt, elt) != 0) {
        report(c, "element " + std::to_string(i) + ": got " + showValue(c.type, recvPtr, i) + ", want " +
                      showValue(c.type, want, i));
        ++shown;
      }
    }
    return false;
  }

 private:
  cfxResult_t call(const Case& c, const void* s, void* r, cfxStream_t stream) {
    switch (c.coll) {
      case Coll::AllReduce: return cfxAllReduce(s, r, c.count, c.type, op_, comm_, stream);
      case Coll::Reduce: return cfxReduce(s, r, c.count, c.type, op_, c.root, comm_, stream);
      case Coll::Broadcast: return cfxBroadcast(s, r, c.count, c.type, c.root, comm_, stream);
      case Coll::AllGather: return cfxAllGather(s, r, c.count, c.type, comm_, stream);
      case Coll::ReduceScatter: return cfxReduceScatter(s, r, c.count, c.type, op_, comm_, stream);
      case Coll::AllToAll: return cfxAllToAll(s, r, c.count, c.type, comm_, stream);
    }
    return cfxInternalError;
  }

  /// The call on device copies of send_ and recv_ (same offsets), then the results copied back.
  cfxResult_t callOnDevice(const Case& c, const std::byte* sendPtr, std::byte* recvPtr) {
#if CONFLUX_TEST_CUDA
    // The copies go on the call's stream: a plain cudaMemcpy from pageable memory may return before
    // its DMA lands, and the non-blocking stream would not wait for it.
    if (!deviceCopy(&dSend_, &dSendBytes_, send_.data(), send_.size(), stream_) ||
        !deviceCopy(&dRecv_, &dRecvBytes_, recv_.data(), recv_.size(), stream_)) {
      return cfxUnhandledCudaError;
    }
    auto onDevice = [&](const std::byte* p) -> std::byte* {
      if (p >= send_.data() && p < send_.data() + send_.size()) return dSend_ + (p - send_.data());
      return dRecv_ + (p - recv_.data());
    };
    cfxResult_t r = call(c, onDevice(sendPtr), onDevice(recvPtr), stream_);
    if (r != cfxSuccess) return r;
    if (cudaStreamSynchronize(stream_) != cudaSuccess) return cfxUnhandledCudaError;
    if (cudaMemcpyAsync(send_.data(), dSend_, send_.size(), cudaMemcpyDeviceToHost, stream_) != cudaSuccess ||
        cudaMemcpyAsync(recv_.data(), dRecv_, recv_.size(), cudaMemcpyDeviceToHost, stream_) != cudaSuccess ||
        cudaStreamSynchronize(stream_) != cudaSuccess) {
      return cfxUnhandledCudaError;
    }
    return cfxSuccess;
#else
    (void)c, (void)sendPtr, (void)recvPtr;
    return cfxInvalidUsage;
#endif
  }

#if CONFLUX_TEST_CUDA
  /// Grows *dev to the host buffer's size and copies the host buffer into it.
  static bool deviceCopy(std::byte** dev, size_t* capacity, const std::byte* host, size_t bytes, cudaStream_t stream) {
    if (bytes > *capacity) {
      if (*dev) cudaFree(*dev);
      *dev = nullptr;
      if (cudaMalloc(reinterpret_cast<void**>(dev), bytes) != cudaSuccess) return false;
      *capacity = bytes;
    }
    return cudaMemcpyAsync(*dev, host, bytes, cudaMemcpyHostToDevice, stream) == cudaSuccess &&
           cudaStreamSynchronize(stream) == cudaSuccess;
  }
#endif

  void expected(const Case& c, uint64_t recvCount) {
    const size_t elt = typeSize(c.type);
    expect_.assign(recvCount * elt, std::byte{0});
    std::byte* out = expect_.data();
    const bool red = reduces(c.coll);
    auto reduced = [&](uint64_t i, uint64_t index) {
      int64_t vals[64] = {};
      for (int k = 0; k < n_; ++k) vals[k] = inputValue(c.type, c.op, red, k, index);
      storeReduced(c.type, c.op, out, i, vals, n_);
    };
    switch (c.coll) {
      case Coll::AllReduce:
      case Coll::Reduce:
        fillPeriodic(out, recvCount, elt, [&](uint64_t i) { reduced(i, i); });
        break;
      case Coll::ReduceScatter: {
        // The global index rank*count + i is what repeats; kPeriod-periodic in i all the same.
        uint64_t base = static_cast<uint64_t>(rank_) * c.count;
        fillPeriodic(out, recvCount, elt, [&](uint64_t i) { reduced(i, base + i); });
        break;
      }
      case Coll::Broadcast:
        fillPeriodic(out, recvCount, elt,
                     [&](uint64_t i) { storeValue(c.type, out, i, inputValue(c.type, c.op, red, c.root, i)); });
        break;
      case Coll::AllGather:
      case Coll::AllToAll:
        for (int from = 0; from < n_; ++from) {
          std::byte* block = out + static_cast<uint64_t>(from) * c.count * elt;
          uint64_t base = c.coll == Coll::AllToAll ? static_cast<uint64_t>(rank_) * c.count : 0;
          fillPeriodic(block, c.count, elt, [&](uint64_t i) {
            storeValue(c.type, block, i, inputValue(c.type, c.op, red, from, base + i));
          });
        }
        break;
    }
  }

  void report(const Case& c, const std::string& what) {
    fprintf(stderr, "FAIL rank %d/%d: %s %s type=%d op=%d count=%llu root=%d: %s\n", rank_, n_,
            collName(c.coll), c.inPlace ? "in-place" : "out-of-place", static_cast<int>(c.type),
            static_cast<int>(c.op), static_cast<unsigned long long>(c.count), c.root, what.c_str());
  }

  /// A test buffer in heap or cfxMemAlloc memory (grown, never shrunk).
  class Buffer {
   public:
    ~Buffer() {
      if (shared_) cfxMemFree(shared_);
    }
    void assign(size_t bytes, std::byte value, bool shared) {
      if (!shared) {
        heap_.assign(bytes, value);
        data_ = heap_.data();
      } else {
        if (bytes > capacity_) {
          if (shared_) cfxMemFree(shared_);
          void* p = nullptr;
          if (cfxMemAlloc(&p, bytes) != cfxSuccess) abort();
          shared_ = static_cast<std::byte*>(p);
          capacity_ = bytes;
        }
        data_ = shared_;
        std::memset(data_, static_cast<int>(value), bytes);
      }
      size_ = bytes;
    }
    std::byte* data() { return data_; }
    size_t size() const { return size_; }

   private:
    std::vector<std::byte> heap_;
    std::byte* shared_ = nullptr;
    size_t capacity_ = 0;
    std::byte* data_ = nullptr;
    size_t size_ = 0;
  };

  cfxComm_t comm_;
  cfxRedOp_t op_ = cfxSum;  // the case's op as passed (a PreMulSum handle for kPreMulSumCase)
  int rank_ = 0;
  int n_ = 1;
  bool shared_ = false;
  bool device_ = false;
  Buffer send_, recv_;
#if CONFLUX_TEST_CUDA
  std::byte* dSend_ = nullptr;
  std::byte* dRecv_ = nullptr;
  size_t dSendBytes_ = 0, dRecvBytes_ = 0;
  cudaStream_t stream_ = nullptr;
#endif
  std::vector<std::byte> before_, expect_;
};

}  // namespace

Sweep fullSweep(std::vector<uint64_t> counts) {
  Sweep s;
  s.colls = {Coll::AllReduce, Coll::Reduce, Coll::Broadcast, Coll::AllGather, Coll::ReduceScatter, Coll::AllToAll};
  for (int t = 0; t < cfxNumTypes; ++t) s.types.push_back(static_cast<cfxDataType_t>(t));
  for (int o = 0; o < cfxNumOps; ++o) s.ops.push_back(static_cast<cfxRedOp_t>(o));
  s.ops.push_back(kPreMulSumCase);
  s.counts = std::move(counts);
  return s;
}

int runSweep(cfxComm_t comm, const Sweep& sweep) {
  CaseRunner runner(comm);
  int n = 1, rank = 0;
  cfxCommCount(comm, &n);
  cfxCommUserRank(comm, &rank);
  runner.useSharedMemory(sweep.memory == Sweep::Memory::Shared ||
                         (sweep.memory == Sweep::Memory::SharedOnEvenRanks && rank % 2 == 0));
  if (sweep.memory == Sweep::Memory::Device && !runner.useDeviceMemory()) {
    fprintf(stderr, "FAIL rank %d: device memory requested but no CUDA device is usable\n", rank);
    return 1;
  }
  int failures = 0;
  for (Coll coll : sweep.colls) {
    const bool red = reduces(coll);
    const bool rooted = coll == Coll::Reduce || coll == Coll::Broadcast;
    for (cfxDataType_t t : sweep.types) {
      for (size_t oi = 0; oi < (red ? sweep.ops.size() : 1); ++oi) {
        cfxRedOp_t op = red ? sweep.ops[oi] : cfxSum;
        if ((op == cfxBand || op == cfxBor || op == cfxBxor) && isFloat(t)) continue;  // integers only
        for (uint64_t count : sweep.counts) {
          for (int inPlace = 0; inPlace <= (sweep.inPlaceToo && coll != Coll::AllToAll ? 1 : 0); ++inPlace) {
            // Rotate the root through the ranks so that every rank is the root sometimes.
            int root = rooted ? static_cast<int>((count + static_cast<uint64_t>(t) + oi) % static_cast<uint64_t>(n)) : 0;
            if (!runner.run({coll, t, op, count, inPlace != 0, root})) ++failures;
            if (failures > 20) return failures;
          }
        }
      }
    }
  }
  return failures;
}

int runRandomCases(cfxComm_t comm, uint64_t seed, int cases, uint64_t maxCount, int everyK,
                   const std::function<void(int done)>& every) {
  CaseRunner runner(comm);
  int n = 1;
  cfxCommCount(comm, &n);
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t k) { return std::uniform_int_distribution<uint64_t>(0, k - 1)(rng); };
  const Coll colls[] = {Coll::AllReduce, Coll::Reduce, Coll::Broadcast, Coll::AllGather, Coll::ReduceScatter, Coll::AllToAll};
  int failures = 0;
  for (int i = 0; i < cases; ++i) {
    Case c;
    c.coll = colls[pick(6)];
    c.type = static_cast<cfxDataType_t>(pick(cfxNumTypes));
    c.op = cfxSum;
    if (reduces(c.coll)) {
      const uint64_t o = pick(cfxNumOps + 1);
      c.op = o == cfxNumOps ? kPreMulSumCase : static_cast<cfxRedOp_t>(o);
      if ((c.op == cfxBand || c.op == cfxBor || c.op == cfxBxor) && isFloat(c.type)) c.op = cfxMax;  // integers only
    }
    // Log-uniform from 1 to maxCount, and 0 one time in 64.
    const double bits = std::uniform_real_distribution<double>(0, std::log2(double(std::max<uint64_t>(maxCount, 1))))(rng);
    c.count = pick(64) == 0 ? 0 : std::max<uint64_t>(1, uint64_t(std::exp2(bits)));
    c.inPlace = c.coll != Coll::AllToAll && pick(2) == 1;
    c.root = int(pick(uint64_t(n)));
    if (!runner.run(c)) ++failures;
    if (failures > 20) return failures;
    if (everyK > 0 && (i + 1) % everyK == 0 && every) every(i + 1);
  }
  return failures;
}

int sweepOnNewComm(int rank, int nranks, const cfxUniqueId& id, const Sweep& sweep) {
  cfxComm_t comm = nullptr;
  if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", rank, cfxGetLastError(nullptr));
    return 2;
  }
  int failures = runSweep(comm, sweep);
  if (cfxCommDestroy(comm) != cfxSuccess) ++failures;
  return failures == 0 ? 0 : 1;
}

}  // namespace conflux::testing
