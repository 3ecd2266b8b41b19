// Plugin contexts and comms: the listen, send and receive comms NCCL holds, and the connection handshake.
//
// Handshake (every step non-blocking; NCCL calls connect and accept again until they return a comm):
//
//   listen   opens (or shares) the context's endpoint on the device, takes a listen id L and writes the
//            handle: endpoint address, L, and a zeroed slot for the connecting side's state.
//   connect  first call: picks the first rail k (0 on a physical device; on a virtual one the next
//            member in turn for this listener), inserts the listener's address, takes a comm id S, posts a
//            receive for ACCEPT(S) and sends CONNECT(L) = {our address, S, k, every member's data
//            address}; the in-progress comm is remembered in the handle's state slot (NCCL passes the same
//            handle again). Later calls: progress; once ACCEPT arrived it carries the receiver's comm id
//            R and data addresses, and the send comm is returned.
//   accept   Idle: posts a receive for CONNECT(L). WaitConnect: once one arrived, takes a comm id R on the
//            endpoint of its own member k of the listened device (listen opened them all), and sends
//            ACCEPT(S) = {R, every member's data address}. Replying: once that send finished, the
//            sender's data addresses go into the address vectors of the matching rails, the receive comm
//            is returned and the listen comm is Idle again (one accept per connection).
//
// Rails: both sides order their data endpoints from member k on (rails[0] is member k, rails[1] the
// next member, ...). Whole messages and headers travel between the rails[0]; stripe j of a striped
// message (net_data.cc) between the rails[j].
//
// Locks: an endpoint's mutex is never held while another's is taken (ids are atomic), so comms on
// virtual devices sharing members in any order cannot deadlock.
//
// The handshake always runs between the endpoints of the devices' first members; data then flows between
// the rails with the tags of net_endpoint.h. On a physical device all of them are one endpoint.
//
// Request lifecycle: each send/receive comm owns a fixed pool of requests (32, or 8 for the v8 ABI).
// isend/irecv take one (none free, or the provider's queue full: *request = NULL and NCCL retries),
// test() reads completions and, once the request is finished, reports sizes and returns it to the pool.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <mutex>
#include <vector>

#include "plugin/net_endpoint.h"

namespace conflux::plugin {

struct RecvComm;

/// Per-NCCL-communicator state (v11 init/finalize; older versions use one per process and ABI version).
class Context {
 public:
  /// Striping receive comms of this context, so that a thread waiting on any comm posts the stripes of
  /// messages whose headers arrived for others (net_data.cc): a send may wait for its peer's stripes to be
  /// posted. Comms that do not stripe are not registered (add and remove ignore them), so a context
  /// without any costs progress one atomic load.
  void addRecvComm(RecvComm* c);
  void removeRecvComm(RecvComm* c);
  template <class F>
  void forEachRecvComm(F&& f) {
    if (stripingComms_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::mutex> lock(commsMutex_);
    for (RecvComm* c : recvComms_) f(*c);
  }

  explicit Context(int maxRequests) : maxRequests_(maxRequests) {}
  /// The endpoint of this context on `dev`, opened on first use; it lives while any comm uses it.
  std::shared_ptr<Endpoint> endpoint(int dev);
  int maxRequests() const { return maxRequests_; }
  /// The rail (member index) for the next connection this context makes on virtual device `dev` to the
  /// listener at `peer` (connections to each listener take the members in turn).
  int nextRail(int dev, const uint8_t* peer, size_t peerBytes, int members);

 private:
  int maxRequests_;
  std::mutex mutex_;
  std::vector<std::weak_ptr<Endpoint>> endpoints_;
  std::map<std::string, int> railCounters_;  ///< by device index and listener address
  std::mutex commsMutex_;  ///< taken under a comm's dataMutex (never the other way), and for removals
  std::vector<RecvComm*> recvComms_;
  std::atomic<size_t> stripingComms_{0};  ///< recvComms_.size(), read without the lock
};

/// The 128-byte listen handle.
struct ListenHandle {
  uint32_t magic;
  uint32_t listenId;
  uint16_t addressBytes;
  uint8_t reserved[6];
  uint64_t connectState;  ///< the connecting side's in-progress SendComm (0 as written by listen)
  uint8_t address[104];
};
static_assert(sizeof(ListenHandle) == abi::kHandleBytes);

/// The data endpoints of one side of a connection: one per member of its (virtual) device, in member
/// order.
struct RailAddresses {
  uint32_t count;  ///< members (1..kMaxRails)
  uint32_t bytes[kMaxRails];
  uint8_t address[kMaxRails][104];
};

/// CONNECT and ACCEPT travel between processes that may run different builds: kHandleMagic names the
/// layout (bump it with any change) and the sizes below are pinned.
struct ConnectMessage {
  uint32_t magic;
  uint32_t sendCommId;
  uint32_t rail;  ///< member index of the comm's first rail (its whole messages and headers go there)
  uint32_t addressBytes;      ///< the send comm's handshake endpoint (the ACCEPT goes there)
  uint8_t address[104];
  RailAddresses data;         ///< the send comm's data endpoints
};
struct AcceptMessage {
  uint32_t magic;
  uint32_t recvCommId;
  RailAddresses data;  ///< the receive comm's data endpoints
};
static_assert(sizeof(RailAddresses) == 436);
static_assert(sizeof(ConnectMessage) == 556 && offsetof(ConnectMessage, data) == 120);
static_assert(sizeof(AcceptMessage) == 444 && offsetof(AcceptMessage, data) == 8);

inline constexpr uint32_t kHandleMagic = 0x43464e33;  // "CFN3": every rail's address, striped messages

/// Requests of one comm.
class RequestPool {
 public:
  explicit RequestPool(int limit) : limit_(limit) {}
  /// A free request, or nullptr when `limit` are in use.
  Request* take();
  void put(Request* r) { r->inUse = false; --used_; }
  int used() const { return used_; }
  std::array<Request, abi::kMaxRequests>& all() { return requests_; }

 private:
  int limit_;
  int used_ = 0;
  std::array<Request, abi::kMaxRequests> requests_;
};

struct Comm {
  enum class Kind : uint8_t { Listen, Send, Recv };
  Comm(Kind k, std::shared_ptr<Endpoint> e) : kind(k), ep(e), ctl(e), rails{std::move(e)} {}
  Kind kind;
  std::shared_ptr<Endpoint> ep;   ///< first data (and regMr) endpoint: rails[0]
  std::shared_ptr<Endpoint> ctl;  ///< handshake endpoint: ep, except on rail k > 0 of a virtual device
  /// Data endpoints: the first rail, then the device's other members in turn (one on a physical device).
  /// A striped message's stripe j travels between the two sides' rails[j].
  std::vector<std::shared_ptr<Endpoint>> rails;
  std::vector<ofi::MemoryRegion*> pinned;  ///< handshake buffers (on ctl) registered for FI_MR_LOCAL providers
  /// Serialises the data path of one comm (posting parts, stripes) across the threads that may call it;
  /// taken before an endpoint's mutex, never under one.
  std::mutex dataMutex;
  Context* ctx = nullptr;
  bool striping = false;  ///< receive comms with more than one rail: they post stripes (net_data.cc)
  /// A receive of a striping comm completed its first operation since its stripes were last looked at
  /// (set by the completion, cleared by the poster).
  std::atomic<bool> headersWaiting{false};
};

struct SendComm : Comm {
  SendComm(std::shared_ptr<Endpoint> e, int maxRequests) : Comm(Kind::Send, std::move(e)), pool(maxRequests) {}
  bool connected = false;
  uint32_t id = 0;        ///< S
  uint32_t remoteId = 0;  ///< R, from ACCEPT
  std::vector<fi_addr_t> peers;          ///< the receive comm's data endpoint per rail
  fi_addr_t listener = FI_ADDR_NOTAVAIL;  ///< the listen comm's endpoint (on ctl)
  uint32_t listenId = 0;
  ConnectMessage hello{};
  AcceptMessage reply{};
  Request helloReq, replyReq;
  bool helloPosted = false, replyPosted = false;
  int stripes = 1;          ///< rails a striped message uses: both sides' rail counts, the smaller
  uint64_t stripeBytes = 0;  ///< messages from this size on are striped (CONFLUX_PLUGIN_STRIPE_BYTES; 0: never)
  Request* partial = nullptr;  ///< an isend with operations not yet posted (a provider queue was full)
  RequestPool pool;
};

struct RecvComm : Comm {
  RecvComm(std::shared_ptr<Endpoint> e, int maxRequests) : Comm(Kind::Recv, std::move(e)), pool(maxRequests) {}
  uint32_t id = 0;  ///< R
  int stripes = 1;  ///< rails a striped message uses (both sides' rail counts, the smaller)
  Request* partial = nullptr;  ///< an irecv with operations not yet posted (provider queue was full)
  /// Striping comms: receive buffers in irecv order, until their message arrived whole or their stripes
  /// were posted (stripes of one tag must be posted in message order: net_data.cc).
  struct Pending {
    Request* request;
    int buffer;
  };
  std::vector<Pending> order;
  RequestPool pool;
};

struct ListenComm : Comm {
  enum class Phase : uint8_t { Idle, WaitConnect, Replying };
  ListenComm(Context& c, std::shared_ptr<Endpoint> e, std::vector<int> devs, int requestLimit)
      : Comm(Kind::Listen, std::move(e)), ctx(&c), members(std::move(devs)), maxRequests(requestLimit) {}
  Context* ctx;
  std::vector<int> members;  ///< physical devices of the listened device (one unless virtual)
  std::vector<std::shared_ptr<Endpoint>> rails;  ///< their endpoints, opened by listen (not under a lock)
  int maxRequests;
  fi_addr_t replyTo = FI_ADDR_NOTAVAIL;  ///< the connecting comm's handshake endpoint
  uint32_t id = 0;  ///< L
  Phase phase = Phase::Idle;
  ConnectMessage inbox{};
  AcceptMessage answer{};
  Request inboxReq, answerReq;
  std::unique_ptr<RecvComm> accepting;
};

/// listen: fills `handle` (128 bytes) and returns the listen comm.
ListenComm* listen(Context& ctx, int dev, void* handle);
/// connect: nullptr until the handshake finished (call again with the same handle).
SendComm* connect(Context& ctx, int dev, void* handle);
/// accept: nullptr until a connection finished its handshake.
RecvComm* accept(ListenComm& listen);
/// Close functions: wait briefly for posted operations (cancelling receives), then free.
void closeListen(ListenComm* comm);
void closeSend(SendComm* comm);
void closeRecv(RecvComm* comm);

}  // namespace conflux::plugin
