// conflux-perf net: the things it measures. A target moves bytes between the two ranks of the run:
//  - raw:    conflux::ofi::Transport, the libfabric transport the communicator and the net plugin sit on;
//  - plugin: any ncclNet plugin library (ours or another), through its exported ABI only, driven as
//            NCCL's proxy drives it (listen/connect/accept loops, regMr, isend/irecv, test, NULL requests
//            for back-pressure).
// All targets of a run share one send and one receive buffer, and are measured by the same loops
// (net_bench.h), so their figures compare like for like.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cfxperf {

/// Swaps a byte blob with the other rank (the run's Conflux communicator carries it).
using PeerExchange = std::function<std::vector<uint8_t>(const std::vector<uint8_t>& mine)>;

/// The two buffers every target sends from and receives into.
struct NetBuffers {
  uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  size_t bytes = 0;
};

class NetTarget {
 public:
  virtual ~NetTarget() = default;
  /// Short name for the table ("raw", or the plugin's own name).
  virtual std::string label() const = 0;
  /// One line for the report's header: what it is, which library and version, which device.
  virtual std::string describe() const = 0;
  /// Operations this target may have in flight per direction (the window is capped to it).
  virtual int maxInFlight() const = 0;
  /// Starts sending the first `bytes` of the send buffer (receiving into the receive buffer) with `tag`.
  /// Returns a handle >= 0, or -1 when the target is busy (NCCL's NULL request): call again.
  virtual int postSend(size_t bytes, int tag) = 0;
  virtual int postRecv(size_t bytes, int tag) = 0;
  /// Progresses; true once the operation finished (its handle is then free). `bytes`, when not null,
  /// receives the size the operation moved. Throws std::runtime_error when the operation failed.
  virtual bool test(int handle, size_t* bytes) = 0;
};

/// The raw libfabric transport between rank `rank` and its peer (throws where the build has no libfabric).
std::unique_ptr<NetTarget> makeRawTarget(int rank, const NetBuffers& buffers, const PeerExchange& exchange);

/// An ncclNet plugin: dlopen(path), ABI `version` (0: the newest of v11..v8 the library exports), its
/// device `device`, or with `merge` the virtual device of those physical devices (makeVDevice). Connects
/// to the peer's instance (each rank listens once and connects once).
std::unique_ptr<NetTarget> makePluginTarget(const std::string& path, int version, int device,
                                            const std::vector<int>& merge, const NetBuffers& buffers,
                                            const PeerExchange& exchange);

}  // namespace cfxperf
