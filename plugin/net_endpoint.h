// One libfabric endpoint (FI_EP_RDM) of a plugin context on one device, shared by every comm that the
// context opens on that device, and the requests posted on it.
//
// Tags (64 bits; receives match exactly):
//
//   63..60  reserved, always 0 (some providers keep the top bits)
//   59      1 = control message of the connection handshake, 0 = data
//   58..32  connection id (27 bits), allocated by this endpoint for its listen and comms:
//             data:    the receiving comm's id (the receiver tells the sender in the handshake)
//             control: the listen id (CONNECT) or the sending comm's id (ACCEPT)
//   31..0   data: NCCL's tag (an int, as its 32 bits); control: the message kind
//
// So a data receive only matches messages for its own comm and NCCL tag, whichever peer the endpoint
// talks to, and no FI_DIRECTED_RECV is needed. Messages with equal tags match in posting order
// (FI_ORDER_SAS), which NCCL relies on when it reuses one tag for successive steps.
#pragma once

#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/nccl_net_abi.h"
#include "transport/ofi/fabric.h"
#include "transport/ofi/memory.h"

namespace conflux::plugin {

struct Device;

inline constexpr int kMaxRecvs = 8;  ///< grouped receives per irecv (properties maxRecvs)
inline constexpr uint64_t kControlBit = uint64_t{1} << 59;
inline constexpr uint32_t kMaxConnectionId = (1u << 27) - 1;
enum ControlKind : uint32_t { kConnectMsg = 1, kAcceptMsg = 2 };

constexpr uint64_t dataTag(uint32_t commId, int ncclTag) {
  return (uint64_t(commId & kMaxConnectionId) << 32) | uint32_t(ncclTag);
}
constexpr uint64_t controlTag(uint32_t id, ControlKind kind) {
  return kControlBit | (uint64_t(id & kMaxConnectionId) << 32) | uint32_t(kind);
}

struct Request;
struct Comm;

/// Context of one posted libfabric operation (first member: the provider's fi_context2 space).
struct Completion {
  fi_context2 fi;
  Request* request = nullptr;
  int index = 0;  ///< which of the request's operations
};

/// An isend, an irecv of up to kMaxRecvs buffers, or a handshake message. Lives in its comm, never moves.
struct Request {
  enum class Kind : uint8_t { Send, Recv, Control };
  Kind kind = Kind::Send;
  bool inUse = false;
  Comm* comm = nullptr;  ///< owner (data requests)
  int n = 0;             ///< operations (1 for sends)
  int pending = 0;       ///< posted and not finished
  int posted = 0;        ///< operations posted so far (receives may be posted in parts: see irecv)
  abi::Result error = abi::kSuccess;
  size_t sizes[kMaxRecvs] = {};  ///< sends: bytes sent; receives: capacity, then bytes received
  // What is still to post (receives only).
  void* data[kMaxRecvs] = {};
  void* desc[kMaxRecvs] = {};
  uint64_t tags[kMaxRecvs] = {};
  Completion ops[kMaxRecvs];

  /// Ready to hand back to NCCL: nothing left to post or to complete.
  bool finished() const { return pending == 0 && (posted == n || error != abi::kSuccess); }
  void reset(Kind k, int count);
};

class Endpoint {
 public:
  /// Opens fabric, domain, completion queue, address vector and endpoint from the device's fi_info.
  Endpoint(const Device& device, int deviceIndex);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  /// Serialises every call on this endpoint (the domain is opened with FI_THREAD_DOMAIN); comms of one
  /// context may be driven from several NCCL threads.
  std::mutex mutex;

  int deviceIndex() const { return deviceIndex_; }
  /// The device's largest message (properties maxP2pBytes).
  size_t maxMessageBytes() const { return maxMessageBytes_; }
  const std::vector<uint8_t>& address() const { return address_; }
  /// The fi_addr of a peer endpoint's address, inserted into the address vector on first use.
  fi_addr_t peer(const uint8_t* address, size_t len);
  /// A fresh connection id (listen ids and comm ids share one space). Needs no lock (atomic), so a comm
  /// can take an id on one endpoint while holding another's lock.
  uint32_t nextId();

  /// fi_tsend (or fi_tinject for small sends, which then finishes at once). Returns 0, -FI_EAGAIN or an error.
  ssize_t send(Request& r, const void* data, size_t len, void* desc, fi_addr_t to, uint64_t tag);
  /// fi_trecv of operation r.posted from r's data/desc/tags/sizes. Returns 0, -FI_EAGAIN or an error.
  ssize_t postRecv(Request& r);
  /// Reads completions and updates their requests. Returns the number read.
  int progress();
  /// Cancels r's posted operations and reads completions until they are gone, for at most ~2 s.
  /// Returns false when some are still posted (the request's memory must then stay allocated).
  bool cancelAndDrain(Request& r);
  /// Reads completions until r is finished or ~timeoutMs passes. Returns r.finished().
  bool drain(Request& r, int timeoutMs);

  ofi::MrCache& mrCache() { return *mrCache_; }
  bool localMr() const { return localMr_; }

 private:
  void onError();

  int deviceIndex_;
  size_t maxMessageBytes_;
  ofi::InfoPtr info_;
  ofi::Fid<fid_fabric> fabric_;
  ofi::Fid<fid_domain> domain_;
  ofi::Fid<fid_cq> cq_;
  ofi::Fid<fid_av> av_;
  ofi::Fid<fid_ep> ep_;
  std::unique_ptr<ofi::MrCache> mrCache_;
  std::vector<uint8_t> address_;
  std::map<std::string, fi_addr_t> peers_;
  std::atomic<uint32_t> nextId_{1};
  size_t injectBytes_ = 0;
  bool localMr_ = false;
};

}  // namespace conflux::plugin
