// One libfabric endpoint (FI_EP_RDM) of a plugin context on one device, shared by every comm that the
// context opens on that device, and the requests posted on it.
//
// Tags (64 bits):
//
//   63..60  reserved, always 0 (some providers keep the top bits)
//   59      1 = control message of the connection handshake, 0 = data
//   58..56  data: what the message is (control: 0)
//             0 a whole message
//             1 the lead piece of a striped message (its first bytes; their count gives the stripe size)
//             2 + j its stripe j (j < 4)
//   55..32  connection id (24 bits), allocated by this endpoint for its listen and comms:
//             data:    the receiving comm's id (the receiver tells the sender in the handshake)
//             control: the listen id (CONNECT) or the sending comm's id (ACCEPT)
//   31..0   data: NCCL's tag (an int, as its 32 bits); control: the message kind
//
// So a data receive only matches messages for its own comm and NCCL tag, whichever peer the endpoint
// talks to, and no FI_DIRECTED_RECV is needed. A receive for NCCL's tag ignores bit 56, so it takes a
// whole message or a lead piece, and the completion's tag says which. Messages with equal tags match in
// posting order (FI_ORDER_SAS), which NCCL relies on when it reuses one tag for successive steps, and
// which matches stripes to their receives as long as the receiver posts them in message order per tag
// (net_data.cc).
#pragma once

#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <algorithm>
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
inline constexpr int kMaxRails = abi::kMaxVDevs;  ///< rails of one comm (members of a virtual device)
inline constexpr uint64_t kControlBit = uint64_t{1} << 59;
inline constexpr uint64_t kHeaderBit = uint64_t{1} << 56;  ///< data kind 1: a striped message's lead piece
inline constexpr int kKindShift = 56;
inline constexpr uint32_t kMaxConnectionId = (1u << 24) - 1;
enum ControlKind : uint32_t { kConnectMsg = 1, kAcceptMsg = 2 };

constexpr uint64_t idBits(uint32_t id) { return uint64_t(id & kMaxConnectionId) << 32; }
/// A whole message for NCCL's tag; with kHeaderBit, the lead piece of a striped one.
constexpr uint64_t dataTag(uint32_t commId, int ncclTag) { return idBits(commId) | uint32_t(ncclTag); }
/// Stripe `stripe` of a striped message for NCCL's tag.
constexpr uint64_t stripeTag(uint32_t commId, int stripe, int ncclTag) {
  return (uint64_t(2 + stripe) << kKindShift) | idBits(commId) | uint32_t(ncclTag);
}
constexpr uint64_t controlTag(uint32_t id, ControlKind kind) { return kControlBit | idBits(id) | uint32_t(kind); }

/// A striped message of `bytes` over `stripes` rails: a lead piece of L bytes, then stripes of P = 64 L
/// bytes each (the last ones shorter or empty), L the smallest with L + stripes x P >= bytes. The receiver
/// learns P from the lead's length alone, so no size has to travel in the bytes.
inline constexpr uint64_t kStripePerLead = 64;
constexpr uint64_t leadBytes(uint64_t bytes, int stripes) {
  const uint64_t parts = 1 + kStripePerLead * uint64_t(stripes);
  return (bytes + parts - 1) / parts;
}
/// Offset and length of stripe j of a message of `bytes` with lead `lead`.
constexpr uint64_t stripeOffset(uint64_t lead, int j) { return lead + uint64_t(j) * kStripePerLead * lead; }
constexpr uint64_t stripeBytes(uint64_t bytes, uint64_t lead, int j) {
  const uint64_t off = stripeOffset(lead, j);
  return off >= bytes ? 0 : std::min(kStripePerLead * lead, bytes - off);
}

struct Request;
struct Comm;

class Endpoint;

/// Context of one posted libfabric operation (first member: the provider's fi_context2 space).
struct Completion {
  fi_context2 fi;
  Request* request = nullptr;
  int index = 0;        ///< which buffer (receives) or operation (sends)
  int stripe = -1;      ///< a stripe's index (received bytes go to `bytes`); -1 otherwise
  Endpoint* ep = nullptr;  ///< where it was last posted (cancelled there at close)
  size_t bytes = 0;     ///< stripes: bytes that arrived (read once the request's pending count is 0)
};

/// What regMr returns: the buffer's registration on each rail of its comm (null where none is needed).
struct Registration {
  ofi::MemoryRegion* rails[kMaxRails] = {};
  void* desc(int rail) const;
};

/// An isend, an irecv of up to kMaxRecvs buffers, or a handshake message. Lives in its comm, never moves.
///
/// A receive posts one operation per buffer (a whole message or a header), then, for each buffer whose
/// header arrived, one per stripe. A send posts the whole message, or the header and then each stripe
/// (`total` operations in all). Completions of one request may be read on several rails by several
/// threads, so the counts they touch are atomic; everything else belongs to the thread driving the comm.
struct Request {
  enum class Kind : uint8_t { Send, Recv, Control };
  Kind kind = Kind::Send;
  bool inUse = false;
  Comm* comm = nullptr;  ///< owner (data requests)
  int n = 0;             ///< buffers (1 for sends)
  int total = 0;         ///< first-level operations to post: n for receives, 1 + stripes for sends
  std::atomic<int> pending{0};   ///< posted and not finished, on any rail
  int posted = 0;        ///< first-level operations posted so far (posted in parts when a queue is full)
  std::atomic<int> unposted{0};  ///< receives: buffers whose header arrived and whose stripes are not all posted
  std::atomic<int> error{abi::kSuccess};  ///< an abi::Result; the first failure is kept
  size_t sizes[kMaxRecvs] = {};  ///< sends: bytes sent; receives: capacity, then bytes received
  // What is still to post.
  void* data[kMaxRecvs] = {};
  void* desc[kMaxRecvs] = {};
  uint64_t tags[kMaxRecvs] = {};
  Completion ops[kMaxRecvs];
  // Striping. Receives: per buffer its capacity, registration and NCCL tag, what its first operation got
  // (set by the completion), the stripes posted. Sends: the same in slot 0.
  enum Arrival : uint8_t { kWaiting = 0, kWhole = 1, kLead = 2 };  ///< kWhole: also a failed first operation
  size_t capacity[kMaxRecvs] = {};
  const Registration* regs[kMaxRecvs] = {};
  int ncclTags[kMaxRecvs] = {};
  std::atomic<uint8_t> arrival[kMaxRecvs] = {};
  int stripesPosted[kMaxRecvs] = {};
  uint8_t sink = 0;  ///< where a stripe goes when its lead found a receive of 0 bytes (an error anyway)
  std::unique_ptr<Completion[]> stripeOps;  ///< kMaxRecvs x kMaxRails, allocated on first use

  abi::Result failure() const { return static_cast<abi::Result>(error.load(std::memory_order_acquire)); }
  void fail(abi::Result e) {
    int ok = abi::kSuccess;
    error.compare_exchange_strong(ok, e, std::memory_order_acq_rel);
  }
  /// Ready to hand back to NCCL: nothing left to post or to complete.
  bool finished() const {
    return pending.load(std::memory_order_acquire) == 0 && unposted.load(std::memory_order_acquire) == 0 &&
           (posted == total || failure() != abi::kSuccess);
  }
  void reset(Kind k, int count);
  Completion& stripeOp(int buffer, int stripe);
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
  /// A fresh connection id (listen ids and comm ids share one space). Ids are unique in the process, not
  /// only on this endpoint: a comm's stripes use its id on the other rails' endpoints too, which virtual
  /// devices may share in any order. Needs no lock (atomic).
  static uint32_t nextId();

  /// fi_tsend (or fi_tinject for small sends, which then finishes at once). Returns 0, -FI_EAGAIN or an error.
  ssize_t send(Request& r, const void* data, size_t len, void* desc, fi_addr_t to, uint64_t tag);
  /// The same for operation `op`, which must stay pending until its completion is read.
  ssize_t send(Completion& op, const void* data, size_t len, void* desc, fi_addr_t to, uint64_t tag);
  /// fi_trecv of operation r.posted from r's data/desc/tags/sizes (data receives also take a header).
  /// Returns 0, -FI_EAGAIN or an error.
  ssize_t postRecv(Request& r);
  /// fi_trecv of one stripe into `op`. Returns 0, -FI_EAGAIN or an error.
  ssize_t postStripe(Completion& op, void* data, size_t len, void* desc, uint64_t tag);
  /// fi_cancel of every operation of `r` last posted on this endpoint.
  void cancel(Request& r);
  /// Sends up to this size are injected (copied at once, no completion).
  size_t injectBytes() const { return injectBytes_; }
  /// Reads completions and updates their requests. Returns the number read.
  int progress();
  /// Cancels r's posted operations and reads completions until they are gone, for at most ~2 s.
  /// Returns false when some are still posted (the request's memory must then stay allocated).
  /// For requests whose operations are all on this endpoint (the handshake's).
  bool cancelAndDrain(Request& r);
  /// Reads completions until r has nothing pending or ~timeoutMs passes. Returns whether it has nothing.
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
  size_t injectBytes_ = 0;
  bool localMr_ = false;
};

}  // namespace conflux::plugin
