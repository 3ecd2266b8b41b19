// conflux-cuda-bench: bandwidth of the CUDA reduce kernels beside cudaMemcpyAsync, one GPU.
//
// For each size B (each buffer's size, doubling from --min-bytes to --max-bytes), CUDA events time every
// repetition after warm-up and the median is reported, in GB/s (decimal) of bytes moved:
//   memcpy     cudaMemcpyAsync device to device, B bytes          2B moved (read + write)
//   f32 sum    launchReduce float32 sum, 2 sources of B bytes     3B
//   bf16 sum   launchReduce bfloat16 sum, 2 sources               3B
//   fused      launchReduce float32 sum into dst and dst2         4B
// and each reduce's ratio to memcpy (the target is >= 0.90). Exit status 2 with "skipped: no CUDA device"
// when there is no device. A plain executable (no Google Benchmark), so it runs wherever CUDA does.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/reduce.h"

namespace {

using conflux::DataType;
using conflux::RedOp;

struct Options {
  size_t minBytes = size_t{1} << 20;
  size_t maxBytes = size_t{1} << 30;
  int warmup = 3;
  int reps = 20;
};

void usage() {
  std::printf(
      "usage: conflux-cuda-bench [--min-bytes N] [--max-bytes N] [--reps N] [--warmup N]\n"
      "  sizes double from min to max (suffixes K, M, G = KiB, MiB, GiB); defaults 1M..1G, 20 reps, 3 warm-up\n");
}

size_t parseSize(const char* s) {
  char* end = nullptr;
  size_t v = std::strtoull(s, &end, 10);
  if (end && (*end == 'K' || *end == 'k')) v <<= 10;
  if (end && (*end == 'M' || *end == 'm')) v <<= 20;
  if (end && (*end == 'G' || *end == 'g')) v <<= 30;
  return v;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help" || i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (a == "--min-bytes") o.minBytes = parseSize(v);
    else if (a == "--max-bytes") o.maxBytes = parseSize(v);
    else if (a == "--reps") o.reps = std::atoi(v);
    else if (a == "--warmup") o.warmup = std::atoi(v);
    else return false;
  }
  return o.minBytes >= 16 && o.maxBytes >= o.minBytes && o.reps >= 1 && o.warmup >= 0;
}

bool check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "conflux-cuda-bench: %s: %s\n", what, cudaGetErrorString(err));
  return false;
}

/// Median milliseconds of `reps` timed calls of op (after `warmup` untimed ones); negative on error.
template <class Op>
float medianMs(const Options& o, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop, Op op) {
  for (int i = 0; i < o.warmup; ++i)
    if (!check(op(), "warm-up")) return -1;
  std::vector<float> ms(o.reps);
  for (int i = 0; i < o.reps; ++i) {
    cudaEventRecord(start, stream);
    if (!check(op(), "timed call")) return -1;
    cudaEventRecord(stop, stream);
    if (!check(cudaEventSynchronize(stop), "event sync")) return -1;
    cudaEventElapsedTime(&ms[i], start, stop);
  }
  std::nth_element(ms.begin(), ms.begin() + o.reps / 2, ms.end());
  return ms[o.reps / 2];
}

double gbps(size_t bytesMoved, float ms) { return ms > 0 ? static_cast<double>(bytesMoved) / (ms * 1e6) : 0.0; }

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    usage();
    return 1;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  int gridLimit = 0;
  conflux::cuda::reduceGridLimit(&gridLimit);
  std::printf("# device 0: %s, %d SMs, reduce grid <= %d x %d threads; median of %d reps after %d warm-up\n",
              prop.name, prop.multiProcessorCount, gridLimit, conflux::cuda::kReduceBlockThreads, o.reps, o.warmup);

  void* buf[4] = {};  // src0, src1, dst, dst2
  for (void*& b : buf) {
    if (!check(cudaMalloc(&b, o.maxBytes), "cudaMalloc")) return 1;
    // 0x3C bytes: finite float32 (0.0115) and bfloat16 (0.0115) values, no NaN or subnormal.
    if (!check(cudaMemset(b, 0x3C, o.maxBytes), "cudaMemset")) return 1;
  }
  cudaStream_t stream;
  cudaEvent_t start, stop;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaEventCreate(&start);
  cudaEventCreate(&stop);

  std::printf("%12s %10s %10s %6s %10s %6s %10s %6s\n", "bytes", "memcpy", "f32_sum", "ratio", "bf16_sum", "ratio",
              "fused", "ratio");
  const void* srcs[2] = {buf[0], buf[1]};
  int status = 0;
  for (size_t b = o.minBytes; b <= o.maxBytes && status == 0; b *= 2) {
    const float tCopy = medianMs(o, stream, start, stop,
                                 [&] { return cudaMemcpyAsync(buf[2], buf[0], b, cudaMemcpyDeviceToDevice, stream); });
    const float tF32 = medianMs(o, stream, start, stop, [&] {
      return conflux::cuda::launchReduce(DataType::Float32, RedOp::Sum, buf[2], nullptr, srcs, 2, b / 4, stream);
    });
    const float tBf16 = medianMs(o, stream, start, stop, [&] {
      return conflux::cuda::launchReduce(DataType::Bfloat16, RedOp::Sum, buf[2], nullptr, srcs, 2, b / 2, stream);
    });
    const float tFused = medianMs(o, stream, start, stop, [&] {
      return conflux::cuda::launchReduce(DataType::Float32, RedOp::Sum, buf[2], buf[3], srcs, 2, b / 4, stream);
    });
    if (tCopy < 0 || tF32 < 0 || tBf16 < 0 || tFused < 0) {
      status = 1;
      break;
    }
    const double copy = gbps(2 * b, tCopy), f32 = gbps(3 * b, tF32), bf16 = gbps(3 * b, tBf16),
                 fused = gbps(4 * b, tFused);
    std::printf("%12zu %10.1f %10.1f %6.2f %10.1f %6.2f %10.1f %6.2f\n", b, copy, f32, f32 / copy, bf16, bf16 / copy,
                fused, fused / copy);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  for (void* p : buf) cudaFree(p);
  return status;
}
