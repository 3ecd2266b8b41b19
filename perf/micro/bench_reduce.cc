// CPU reduce and copy kernels: throughput of every datatype x op (sum and max for every type, every op for
// float32) on every instruction-set path this CPU supports, beside memcpy and cpu::copy of the same bytes,
// and the single-core bound of a 2-rank all-reduce (docs/performance-method.md has the formula).
//
// Names:   reduce/<isa>/<type>/<op>/nsrc:<n>/<size>      dst = op(src0..src(n-1)), out of place
//          reduce_inplace/<isa>/float32/sum/nsrc:2/<size> dst == src0 (what RecvReduce does in place)
//          copy/memcpy/<size>, copy/cpu_copy/<isa>/<size>
//          bound/allreduce2/64MiB/<variant>[/threads:2]  one rank's share of a 2-rank two-shot all-reduce
// <size> is the size of EACH buffer (every source and the destination).
// Counters: GBps = bytes read + written per second (decimal GB), out_GBps = destination bytes per second,
// busbw_bound_GBps (bound/ only) = S / time, the bus bandwidth a 2-rank all-reduce of S bytes could reach
// if it were limited only by this work.
#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/types.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/reduce.h"

namespace {

using conflux::DataType;
using conflux::RedOp;
using conflux::bench::Buffer;
using conflux::bench::gbps;
using conflux::bench::sizeLabel;
namespace cpu = conflux::cpu;

constexpr size_t kSizes[] = {64u << 10, 1u << 20, 64u << 20};
constexpr size_t kMaxBytes = 64u << 20;

// Buffers shared by all benchmarks: allocated lazily at kMaxBytes, pre-faulted, and filled once with
// float32 values 1..7. Read as any other type those bits are ordinary finite numbers (no NaN, no
// subnormal), so no path hits a slow special case.
class Pool {
 public:
  std::byte* get(size_t index) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (bufs_.size() <= index) bufs_.resize(index + 1);
    if (bufs_[index].size() == 0) {
      bufs_[index] = Buffer(kMaxBytes);
      auto* f = reinterpret_cast<float*>(bufs_[index].data());
      for (size_t i = 0; i < kMaxBytes / sizeof(float); ++i) f[i] = static_cast<float>(1 + (i + index) % 7);
    }
    return bufs_[index].data();
  }

 private:
  std::mutex mutex_;
  std::vector<Buffer> bufs_;
};
Pool& pool() {
  static Pool p;
  return p;
}

// Restores the dispatcher's default ISA when a benchmark that forced one ends.
struct IsaScope {
  explicit IsaScope(cpu::Isa isa) { ok = cpu::forceIsa(isa); }
  ~IsaScope() { cpu::forceIsa("auto"); }
  bool ok = false;
};

void setRates(benchmark::State& state, double trafficPerIter, double outPerIter) {
  const auto iters = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(trafficPerIter * iters));
  state.counters["GBps"] = gbps(trafficPerIter * iters);
  state.counters["out_GBps"] = gbps(outPerIter * iters);
}

void benchReduce(benchmark::State& state, cpu::Isa isa, DataType type, RedOp op, int nsrc, size_t bytes,
                 bool inPlace) {
  const cpu::ReduceFn fn = cpu::reduceFunction(isa, type, op);
  if (fn == nullptr) {
    state.SkipWithError("ISA path not supported");
    return;
  }
  std::vector<const void*> srcs(nsrc);
  for (int i = 0; i < nsrc; ++i) srcs[i] = pool().get(1 + i);
  void* dst = inPlace ? const_cast<void*>(srcs[0]) : pool().get(0);
  const size_t count = bytes / conflux::dataTypeSize(type);
  for (auto _ : state) {
    fn(dst, srcs.data(), nsrc, count);
    benchmark::ClobberMemory();
  }
  setRates(state, static_cast<double>(bytes) * (nsrc + 1), static_cast<double>(bytes));
}

void benchMemcpy(benchmark::State& state, size_t bytes) {
  std::byte* dst = pool().get(0);
  const std::byte* src = pool().get(1);
  for (auto _ : state) {
    std::memcpy(dst, src, bytes);
    benchmark::ClobberMemory();
  }
  setRates(state, 2.0 * static_cast<double>(bytes), static_cast<double>(bytes));
}

void benchCpuCopy(benchmark::State& state, cpu::Isa isa, size_t bytes) {
  IsaScope scope(isa);
  if (!scope.ok) {
    state.SkipWithError("ISA path not supported");
    return;
  }
  std::byte* dst = pool().get(0);
  const std::byte* src = pool().get(1);
  for (auto _ : state) {
    cpu::copy(dst, src, bytes);
    benchmark::ClobberMemory();
  }
  setRates(state, 2.0 * static_cast<double>(bytes), static_cast<double>(bytes));
}

// One rank's share of a 2-rank two-shot all-reduce of S bytes (float32 sum, widest ISA): read its half
// of both inputs (a, b: S/2 each), reduce, and write the result into both ranks' outputs (out0, out1:
// S/2 each). Both ranks do this at the same time on their own core, so the all-reduce takes at least this
// long: busbw (= algbw for 2 ranks) <= S / t.
//   chunk == 0: reduce the whole half into out0, then cpu::copy out0 -> out1 (two passes over memory).
//   chunk  > 0: the same per chunk, so the copy reads the freshly reduced chunk from cache.
//   spread:     cpu::reduceStreamingTo into out0 and out1 at once (one pass, non-temporal stores: the
//               direct all-reduce's ReduceSpread, 4S bytes of DRAM traffic per all-reduce, the least).
// With ->Threads(2) both ranks' shares run concurrently (each thread pinned to its own core, own buffers):
// the bound under shared memory bandwidth.
void benchAllReduce2Bound(benchmark::State& state, size_t totalBytes, size_t chunk, bool spread) {
  const int t = state.thread_index();
  conflux::bench::ScopedPin pin(state.threads() > 1 ? t : -1);
  const size_t half = totalBytes / 2;
  const size_t base = 16 + 4 * static_cast<size_t>(t);
  const void* srcs[2] = {pool().get(base), pool().get(base + 1)};
  std::byte* out0 = pool().get(base + 2);
  std::byte* out1 = pool().get(base + 3);
  const cpu::ReduceFn fn = cpu::reduceFunction(DataType::Float32, RedOp::Sum);
  const size_t step = chunk == 0 ? half : chunk;
  for (auto _ : state) {
    for (size_t off = 0; off < half; off += step) {
      const size_t n = std::min(step, half - off);
      const void* s[2] = {static_cast<const std::byte*>(srcs[0]) + off, static_cast<const std::byte*>(srcs[1]) + off};
      if (spread) {
        void* outs[2] = {out0 + off, out1 + off};
        cpu::reduceStreamingTo(DataType::Float32, RedOp::Sum, outs, 2, s, 2, n / sizeof(float));
        continue;
      }
      fn(out0 + off, s, 2, n / sizeof(float));
      cpu::copy(out1 + off, out0 + off, n);
    }
    benchmark::ClobberMemory();
  }
  const auto iters = static_cast<double>(state.iterations());
  // Logical traffic of one core: reads S (two halves), writes S (two outputs).
  state.SetBytesProcessed(static_cast<int64_t>(2.0 * static_cast<double>(totalBytes) * iters));
  state.counters["GBps"] = gbps(2.0 * static_cast<double>(totalBytes) * iters);
  state.counters["busbw_bound_GBps"] = gbps(static_cast<double>(totalBytes) * iters);
}

void registerAll() {
  std::vector<cpu::Isa> isas;
  for (int i = 0; i < cpu::kNumIsas; ++i) {
    if (cpu::isaSupported(static_cast<cpu::Isa>(i))) isas.push_back(static_cast<cpu::Isa>(i));
  }
  const RedOp allOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg};
  for (cpu::Isa isa : isas) {
    const std::string isaStr = cpu::isaName(isa);
    for (int ti = 0; ti < conflux::kNumDataTypes; ++ti) {
      const auto type = static_cast<DataType>(ti);
      const std::string typeStr(conflux::dataTypeName(type));
      for (RedOp op : allOps) {
        const bool wanted = op == RedOp::Sum || op == RedOp::Max || type == DataType::Float32;
        if (!wanted) continue;
        std::vector<int> nsrcs = {2};
        if (type == DataType::Float32 && op == RedOp::Sum) nsrcs = {2, 4, 8};
        for (int nsrc : nsrcs) {
          for (size_t bytes : kSizes) {
            const std::string name = "reduce/" + isaStr + "/" + typeStr + "/" + std::string(redOpName(op)) + "/nsrc:" +
                                     std::to_string(nsrc) + "/" + sizeLabel(bytes);
            benchmark::RegisterBenchmark(name.c_str(), benchReduce, isa, type, op, nsrc, bytes, false);
          }
        }
      }
    }
    for (size_t bytes : kSizes) {
      const std::string name = "reduce_inplace/" + isaStr + "/float32/sum/nsrc:2/" + sizeLabel(bytes);
      benchmark::RegisterBenchmark(name.c_str(), benchReduce, isa, DataType::Float32, RedOp::Sum, 2, bytes, true);
    }
  }
  for (size_t bytes : kSizes) {
    benchmark::RegisterBenchmark(("copy/memcpy/" + sizeLabel(bytes)).c_str(), benchMemcpy, bytes);
    for (cpu::Isa isa : isas) {
      const std::string name = std::string("copy/cpu_copy/") + cpu::isaName(isa) + "/" + sizeLabel(bytes);
      benchmark::RegisterBenchmark(name.c_str(), benchCpuCopy, isa, bytes);
    }
  }
  const size_t total = 64u << 20;
  const size_t chunks[] = {0, 64u << 10, 256u << 10, 1u << 20};
  for (int v = 0; v <= 4; ++v) {
    const bool spread = v == 4;
    const size_t chunk = spread ? 128u << 10 : chunks[v];
    const std::string variant = spread ? "spread" : chunk == 0 ? "unfused" : "chunk:" + sizeLabel(chunk);
    const std::string name = "bound/allreduce2/" + sizeLabel(total) + "/" + variant;
    benchmark::RegisterBenchmark(name.c_str(), benchAllReduce2Bound, total, chunk, spread);
    if (conflux::bench::allowedCpus() >= 2) {
      // Wall time: the two shares run at once. The Time column is then per iteration of either thread
      // (wall / 2); the counters are per all-reduce.
      benchmark::RegisterBenchmark(name.c_str(), benchAllReduce2Bound, total, chunk, spread)->Threads(2)->UseRealTime();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  registerAll();
  benchmark::AddCustomContext("conflux_isa_default", cpu::isaName());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
