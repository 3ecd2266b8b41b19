#include "buffer.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace cfxperf {

const std::vector<std::unique_ptr<Backend>>& Buffer::noBackends() {
  static const std::vector<std::unique_ptr<Backend>> none;
  return none;
}

void Buffer::init(size_t bytes, bool shared, Memory memory) {
  bytes = bytes == 0 ? 1 : bytes;
  if (memory == Memory::Cuda) {
    device_ = std::make_unique<DeviceMemory>(bytes);  // zeroed
    p_ = device_->get();
    return;
  }
  if (shared) {
    if (cfxMemAlloc(&p_, bytes) != cfxSuccess) throw std::runtime_error(std::string("cfxMemAlloc: ") + cfxGetLastError(nullptr));
    shared_ = true;
    for (const auto& b : backends_) handles_.push_back(b->registerBuffer(p_, bytes));
  } else if (posix_memalign(&p_, 4096, bytes) != 0) {
    throw std::runtime_error("out of memory");
  }
  std::memset(p_, 0, bytes);  // fault the pages in before timing
}

Buffer::~Buffer() {
  for (size_t i = 0; i < handles_.size(); ++i) backends_[i]->deregisterBuffer(handles_[i]);
  if (device_) return;
  if (shared_) cfxMemFree(p_);
  else std::free(p_);
}

}  // namespace cfxperf
