// Plugin contexts and comms: the listen, send and receive comms NCCL holds, and the connection handshake.
//
// Handshake (every step non-blocking; NCCL calls connect and accept again until they return a comm):
//
//   listen   opens (or shares) the context's endpoint on the device, takes a listen id L and writes the
//            handle: endpoint address, L, and a zeroed slot for the connecting side's state.
//   connect  first call: picks the rail k (0 on a physical device; on a virtual one the next member in
//            turn for this listener), inserts the listener's address, takes a comm id S, posts a receive
//            for ACCEPT(S) and sends CONNECT(L) = {our address, S, k, our rail-k address}; the in-progress
//            comm is remembered in
//            the handle's state slot (NCCL passes the same handle again). Later calls: progress; once
//            ACCEPT arrived it carries the receiver's comm id R and data address, and the send comm is
//            returned.
//   accept   Idle: posts a receive for CONNECT(L). WaitConnect: once one arrived, takes a comm id R on the
//            endpoint of its own member k of the listened device (listen opened them all), and sends
//            ACCEPT(S) = {R, that endpoint's address}. Replying: once that send finished, the sender's
//            rail-k address goes into that endpoint's address vector, the receive comm is returned and
//            the listen comm is Idle again (one accept per connection).
//
// Locks: an endpoint's mutex is never held while another's is taken (ids are atomic), so comms on
// virtual devices sharing members in any order cannot deadlock.
//
// The handshake always runs between the endpoints of the devices' first members; data then flows between
// the rail-k endpoints with tag dataTag(R, ncclTag) (see net_endpoint.h). On a physical device the two
// are the same endpoint.
//
// Request lifecycle: each send/receive comm owns a fixed pool of requests (32, or 8 for the v8 ABI).
// isend/irecv take one (none free, or the provider's queue full: *request = NULL and NCCL retries),
// test() reads completions and, once the request is finished, reports sizes and returns it to the pool.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <mutex>
#include <vector>

#include "plugin/net_endpoint.h"

namespace conflux::plugin {

/// Per-NCCL-communicator state (v11 init/finalize; older versions use one per process and ABI version).
class Context {
 public:
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

/// CONNECT and ACCEPT travel between processes that may run different builds: kHandleMagic names the
/// layout (bump it with any change) and the sizes below are pinned.
struct ConnectMessage {
  uint32_t magic;
  uint32_t sendCommId;
  uint32_t rail;  ///< member index of the (virtual) device the data will use
  uint32_t addressBytes;      ///< the send comm's handshake endpoint (the ACCEPT goes there)
  uint8_t address[104];
  uint32_t dataAddressBytes;  ///< the send comm's data endpoint (rail `rail`)
  uint8_t dataAddress[104];
};
struct AcceptMessage {
  uint32_t magic;
  uint32_t recvCommId;
  uint32_t addressBytes;  ///< the receive comm's data endpoint
  uint8_t address[104];
};
static_assert(sizeof(ConnectMessage) == 228 && offsetof(ConnectMessage, dataAddressBytes) == 120);
static_assert(sizeof(AcceptMessage) == 116 && offsetof(AcceptMessage, address) == 12);

inline constexpr uint32_t kHandleMagic = 0x43464e32;  // "CFN2": virtual-device handshake

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
  Comm(Kind k, std::shared_ptr<Endpoint> e) : kind(k), ep(e), ctl(std::move(e)) {}
  Kind kind;
  std::shared_ptr<Endpoint> ep;   ///< data (and regMr) endpoint
  std::shared_ptr<Endpoint> ctl;  ///< handshake endpoint: ep, except on rail k > 0 of a virtual device
  std::vector<ofi::MemoryRegion*> pinned;  ///< handshake buffers (on ctl) registered for FI_MR_LOCAL providers
};

struct SendComm : Comm {
  SendComm(std::shared_ptr<Endpoint> e, int maxRequests) : Comm(Kind::Send, std::move(e)), pool(maxRequests) {}
  bool connected = false;
  uint32_t id = 0;        ///< S
  uint32_t remoteId = 0;  ///< R, from ACCEPT
  fi_addr_t peer = FI_ADDR_NOTAVAIL;     ///< the receive comm's data endpoint (on ep)
  fi_addr_t listener = FI_ADDR_NOTAVAIL;  ///< the listen comm's endpoint (on ctl)
  uint32_t listenId = 0;
  ConnectMessage hello{};
  AcceptMessage reply{};
  Request helloReq, replyReq;
  bool helloPosted = false, replyPosted = false;
  RequestPool pool;
};

struct RecvComm : Comm {
  RecvComm(std::shared_ptr<Endpoint> e, int maxRequests) : Comm(Kind::Recv, std::move(e)), pool(maxRequests) {}
  uint32_t id = 0;  ///< R
  Request* partial = nullptr;  ///< an irecv with operations not yet posted (provider queue was full)
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
