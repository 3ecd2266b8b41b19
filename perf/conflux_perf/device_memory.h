// conflux-perf: CUDA device memory for --memory cuda. device_memory.cc implements this over the CUDA
// runtime in builds with CUDA (CONFLUX_HAVE_CUDA); cuda_unavailable.cc stands in otherwise, where
// options.cc rejects --memory cuda before anything here could be reached. Streams are passed as void*
// (a cudaStream_t), so that code built without CUDA headers can hold one.
#pragma once

#include <cstddef>
#include <string>

namespace cfxperf {

/// Whether this conflux-perf was built with CUDA.
bool cudaBuilt();

/// The number of CUDA devices this process sees. 0 when there is none or the runtime cannot tell
/// (no driver, for example); *why then says what the runtime answered. Initializes CUDA in the calling
/// process, so a process that will fork ranks must not call it (the children do).
int visibleDeviceCount(std::string* why);

/// cudaSetDevice(index). Throws std::runtime_error on failure.
void selectDevice(int index);

/// The current device's index, name and PCI bus id ("0000:1b:00.0"), for the header.
void describeDevice(int* index, std::string* name, std::string* busId);

/// cudaMalloc / cudaFree (the memory is zeroed). Throws std::runtime_error on failure.
void* deviceAlloc(size_t bytes);
void deviceFree(void* p);

/// A new non-blocking stream; cudaStreamDestroy. Throws std::runtime_error on failure.
void* streamCreate();
void streamDestroy(void* stream);
/// cudaStreamSynchronize. Throws std::runtime_error on failure (an asynchronous error of a call included).
void streamSync(void* stream);

/// Copies between host and device memory on @p stream and waits for the copy.
void copyToDevice(void* device, const void* host, size_t bytes, void* stream);
void copyToHost(void* host, const void* device, size_t bytes, void* stream);
/// Enqueues a device-to-device copy on @p stream (no wait).
void copyOnDeviceAsync(void* dst, const void* src, size_t bytes, void* stream);

/// Device memory owned by one object.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(size_t bytes) : p_(deviceAlloc(bytes)), bytes_(bytes) {}
  ~DeviceMemory() { if (p_ != nullptr) deviceFree(p_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  char* get() const { return static_cast<char*>(p_); }
  size_t size() const { return bytes_; }
  /// Makes the memory at least @p bytes long (its contents are not kept).
  void reserve(size_t bytes) {
    if (bytes <= bytes_) return;
    if (p_ != nullptr) deviceFree(p_);
    p_ = nullptr;
    bytes_ = 0;
    p_ = deviceAlloc(bytes);
    bytes_ = bytes;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

/// A stream owned by one object.
class DeviceStream {
 public:
  DeviceStream() : s_(streamCreate()) {}
  ~DeviceStream() { streamDestroy(s_); }
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  void* get() const { return s_; }
  void wait() const { streamSync(s_); }

 private:
  void* s_;
};

}  // namespace cfxperf
