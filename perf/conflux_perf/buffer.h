// conflux-perf: the memory a benchmark moves: page-aligned host memory, cfxMemAlloc memory registered
// with the backends (-R 1), or CUDA device memory.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "backend.h"
#include "device_memory.h"
#include "options.h"

namespace cfxperf {

/// One benchmark buffer: page-aligned heap memory, cfxMemAlloc memory registered with every backend
/// (-R 1, as nccl-tests' -R allocates with ncclMemAlloc and registers), or CUDA device memory.
class Buffer {
 public:
  Buffer(size_t bytes, bool shared, Memory memory, const std::vector<std::unique_ptr<Backend>>& backends)
      : backends_(backends) {
    init(bytes, shared, memory);
  }
  /// Page-aligned, zeroed host memory registered with nothing.
  explicit Buffer(size_t bytes) : backends_(noBackends()) { init(bytes, false, Memory::Host); }
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  char* get() const { return static_cast<char*>(p_); }

 private:
  static const std::vector<std::unique_ptr<Backend>>& noBackends();
  void init(size_t bytes, bool shared, Memory memory);

  const std::vector<std::unique_ptr<Backend>>& backends_;
  void* p_ = nullptr;
  bool shared_ = false;
  std::unique_ptr<DeviceMemory> device_;
  std::vector<void*> handles_;
};

}  // namespace cfxperf
