// conflux-perf: stand-ins for device_memory.cc and backend_nccl.cc in builds without CUDA. options.cc
// rejects --memory cuda there (and the nccl backend needs it), so only cudaBuilt() is ever reached; the
// others fail loudly if they are.
#include <stdexcept>

#include "backend.h"
#include "device_memory.h"

namespace cfxperf {

namespace {

[[noreturn]] void noCuda() { throw std::runtime_error("this conflux-perf was built without CUDA"); }

}  // namespace

bool cudaBuilt() { return false; }
int visibleDeviceCount(std::string* why) {
  *why = "this conflux-perf was built without CUDA";
  return 0;
}
void selectDevice(int) { noCuda(); }
void describeDevice(int*, std::string*, std::string*) { noCuda(); }
void* deviceAlloc(size_t) { noCuda(); }
void deviceFree(void*) {}
void* streamCreate() { noCuda(); }
void streamDestroy(void*) {}
void streamSync(void*) { noCuda(); }
void copyToDevice(void*, const void*, size_t, void*) { noCuda(); }
void copyToHost(void*, const void*, size_t, void*) { noCuda(); }
void copyOnDeviceAsync(void*, const void*, size_t, void*) { noCuda(); }

bool ncclLoad(std::string* error) {
  *error = "the nccl backend needs a build with CUDA";
  return false;
}
std::unique_ptr<Backend> makeNcclBackend(cfxComm_t, bool) { noCuda(); }

}  // namespace cfxperf
