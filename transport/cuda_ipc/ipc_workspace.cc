// IpcWorkspace: allocation, handle exchange and mapping; two all-gathers so every rank agrees.
#include "transport/cuda_ipc/ipc_workspace.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace conflux::cuda_ipc {
namespace {

constexpr size_t kAlign = 256;
constexpr size_t kReasonBytes = 192;

size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
size_t flagsBytes() { return alignUp(cuda::kIpcFlagWords * sizeof(uint64_t)); }

std::string cudaText(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

/// Makes `device` current for a scope and restores the caller's device afterwards.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

/// What each rank contributes to an all-gather: whether its step worked, why not, and a handle.
struct Report {
  uint32_t ok = 0;
  cudaIpcMemHandle_t handle{};
  char busId[32] = {};  // PCI bus id of the rank's GPU
  int32_t sms = 0;      // its multiprocessors
  char reason[kReasonBytes] = {};
};

std::vector<uint8_t> encode(const Report& r) {
  std::vector<uint8_t> v(sizeof(Report));
  std::memcpy(v.data(), &r, sizeof r);
  return v;
}

/// All-gathers the reports; Ok when every rank's step worked, else the first failure, named.
Status gather(const AllGather& allGather, const Report& mine, int nranks, std::vector<Report>& all,
              const char* step) {
  std::vector<uint8_t> bytes;
  if (Status s = allGather(encode(mine), bytes); !s) return s;
  if (bytes.size() != sizeof(Report) * static_cast<size_t>(nranks)) {
    return Status(Code::InternalError, "CUDA IPC set-up: all-gather returned " + std::to_string(bytes.size()) + " bytes");
  }
  all.resize(nranks);
  std::memcpy(all.data(), bytes.data(), bytes.size());
  for (int r = 0; r < nranks; ++r) {
    if (!all[r].ok) {
      all[r].reason[kReasonBytes - 1] = '\0';
      return Status(Code::CudaError, std::string("CUDA IPC set-up (") + step + ") failed on local rank " +
                                         std::to_string(r) + ": " + all[r].reason);
    }
  }
  return Status::ok();
}

void setReason(Report& r, const std::string& why) {
  r.ok = 0;
  std::strncpy(r.reason, why.c_str(), kReasonBytes - 1);
}

}  // namespace

std::unique_ptr<IpcWorkspace> IpcWorkspace::create(int rank, int nranks, int device, size_t slotBytes,
                                                   const AllGather& allGather, Status& status) {
  std::unique_ptr<IpcWorkspace> w(new IpcWorkspace());
  w->device_ = device;
  w->slotBytes_ = alignUp(slotBytes);
  if (nranks > cuda::kIpcMaxRanks) {
    status = Status(Code::InvalidUsage, "CUDA IPC supports at most " + std::to_string(cuda::kIpcMaxRanks) + " ranks");
    return nullptr;
  }
  status = w->open(rank, nranks, allGather);
  if (!status) return nullptr;  // the destructor released whatever was made
  return w;
}

Status IpcWorkspace::open(int rank, int nranks, const AllGather& allGather) {
  DeviceScope scope(device_);
  const size_t total = flagsBytes() + 2 * slotBytes_;
  Report mine;
  mine.ok = 1;
  cudaError_t e = cudaMalloc(&mine_, total);
  if (e != cudaSuccess) {
    mine_ = nullptr;
    setReason(mine, cudaText("cudaMalloc of the workspace", e));
  }
  // Flags start at 0 and must be zero before any peer can see the handle.
  if (mine.ok && (e = cudaMemset(mine_, 0, flagsBytes())) == cudaSuccess) e = cudaDeviceSynchronize();
  if (mine.ok && e != cudaSuccess) setReason(mine, cudaText("clearing the flags", e));
  if (mine.ok && (e = cudaIpcGetMemHandle(&mine.handle, mine_)) != cudaSuccess) {
    setReason(mine, cudaText("cudaIpcGetMemHandle", e));
  }
  if (mine.ok && (e = cudaHostAlloc(reinterpret_cast<void**>(&errorHost_), sizeof(uint32_t), cudaHostAllocMapped)) != cudaSuccess) {
    errorHost_ = nullptr;
    setReason(mine, cudaText("cudaHostAlloc of the error word", e));
  }
  if (mine.ok) {
    *errorHost_ = 0;
    if ((e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&errorDevice_), errorHost_, 0)) != cudaSuccess) {
      setReason(mine, cudaText("cudaHostGetDevicePointer", e));
    }
  }
  if (cudaDeviceGetPCIBusId(mine.busId, sizeof mine.busId - 1, device_) != cudaSuccess) cudaGetLastError();
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_) != cudaSuccess) cudaGetLastError();
  mine.sms = sms;
  if (!mine.ok) cudaGetLastError();
  std::vector<Report> all;
  if (Status s = gather(allGather, mine, nranks, all, "allocation"); !s) return s;
  // Block b of every rank waits for block b of the others. Ranks sharing a GPU must therefore fit all
  // their grids on it at once: with g ranks on the most shared GPU, each grid gets SMs / g blocks (at
  // least one block fits on every SM). Every rank computes the same cap from the same reports.
  int mostShared = 1, fewestSms = 1 << 30;
  for (int p = 0; p < nranks; ++p) {
    int same = 0;
    for (int q = 0; q < nranks; ++q) same += std::strncmp(all[p].busId, all[q].busId, sizeof mine.busId) == 0;
    mostShared = std::max(mostShared, same);
    fewestSms = std::min(fewestSms, std::max(1, static_cast<int>(all[p].sms)));
    if (p != rank && std::strncmp(all[p].busId, mine.busId, sizeof mine.busId) == 0) ++sharers_;
  }
  maxBlocks_ = std::max(1, std::min(cuda::kIpcMaxBlocks, fewestSms / mostShared));
  oneGpu_ = mostShared == nranks;

  Report opened;
  opened.ok = 1;
  mapped_.assign(nranks, nullptr);
  for (int p = 0; p < nranks && opened.ok; ++p) {
    if (p == rank) continue;
    if ((e = cudaIpcOpenMemHandle(&mapped_[p], all[p].handle, cudaIpcMemLazyEnablePeerAccess)) != cudaSuccess) {
      mapped_[p] = nullptr;
      cudaGetLastError();
      setReason(opened, cudaText(("cudaIpcOpenMemHandle of local rank " + std::to_string(p)).c_str(), e));
    }
  }
  std::vector<Report> outcome;
  if (Status s = gather(allGather, opened, nranks, outcome, "mapping"); !s) return s;

  for (int p = 0; p < nranks; ++p) {
    auto* base = static_cast<std::byte*>(p == rank ? mine_ : mapped_[p]);
    peers_.flags[p] = reinterpret_cast<uint64_t*>(base);
    peers_.data[p] = base + flagsBytes();
  }
  return Status::ok();
}

IpcWorkspace::~IpcWorkspace() {
  DeviceScope scope(device_);
  for (void* p : mapped_) {
    if (p != nullptr) cudaIpcCloseMemHandle(p);
  }
  if (mine_ != nullptr) cudaFree(mine_);
  if (errorHost_ != nullptr) cudaFreeHost(errorHost_);
  cudaGetLastError();
}

uint32_t IpcWorkspace::errorWord() const {
  return errorHost_ == nullptr ? 0 : *static_cast<volatile uint32_t*>(errorHost_);
}

}  // namespace conflux::cuda_ipc
