// conflux-perf: CUDA device memory over the CUDA runtime (see device_memory.h). Built only with CUDA.
#include "device_memory.h"

#include <cuda_runtime.h>

#include <stdexcept>

namespace cfxperf {

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorName(err) + ": " +
                             cudaGetErrorString(err));
  }
}

cudaStream_t asStream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

bool cudaBuilt() { return true; }

int visibleDeviceCount(std::string* why) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    return 0;
  }
  if (count == 0) *why = "cudaGetDeviceCount found 0 devices";
  return count;
}

void selectDevice(int index) { check(cudaSetDevice(index), ("cudaSetDevice(" + std::to_string(index) + ")").c_str()); }

void describeDevice(int* index, std::string* name, std::string* busId) {
  check(cudaGetDevice(index), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, *index), "cudaGetDeviceProperties");
  *name = prop.name;
  char bus[32] = {};
  check(cudaDeviceGetPCIBusId(bus, static_cast<int>(sizeof bus), *index), "cudaDeviceGetPCIBusId");
  *busId = bus;
}

void* deviceAlloc(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
  cudaError_t err = cudaMemset(p, 0, bytes == 0 ? 1 : bytes);
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    cudaFree(p);
    check(err, "cudaMemset");
  }
  return p;
}

void deviceFree(void* p) { cudaFree(p); }

void* streamCreate() {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return s;
}

void streamDestroy(void* stream) { cudaStreamDestroy(asStream(stream)); }

void streamSync(void* stream) { check(cudaStreamSynchronize(asStream(stream)), "cudaStreamSynchronize"); }

void copyToDevice(void* device, const void* host, size_t bytes, void* stream) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, asStream(stream)), "cudaMemcpyAsync (to device)");
  streamSync(stream);
}

void copyToHost(void* host, const void* device, size_t bytes, void* stream) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, asStream(stream)), "cudaMemcpyAsync (to host)");
  streamSync(stream);
}

void copyOnDeviceAsync(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, asStream(stream)), "cudaMemcpyAsync (device)");
}

}  // namespace cfxperf
