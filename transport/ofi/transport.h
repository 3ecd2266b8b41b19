// conflux::ofi::Transport: point-to-point messages between ranks over libfabric reliable-datagram
// endpoints (FI_EP_RDM) with tagged send/receive. One rank owns one endpoint per rail (NIC/domain);
// large messages are cut into chunks, several in flight, striped over the rails. Small messages go out
// with fi_tinject. Where the provider offers FI_RMA, a rank can expose memory and its peers write into it
// (iwrite), chunked and striped the same way (rma.h). Waiting spins briefly, then blocks on the completion
// queue's wait object, and always ends by a deadline with a Status naming the peer and the operation.
// See docs/ofi.md.
//
// Thread-safe: a cfxCommSplit child shares its parent's Transport (each communicator in its own tag
// space, through a CommNet), and the two may be driven from different threads at once. A lock serialises
// every libfabric call (the domain is opened FI_THREAD_DOMAIN); a thread that sleeps in poll or wait is
// woken by whichever thread reads a completion (Waiter).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "transport/ofi/rma.h"
#include "transport/ofi/tags.h"
#include "transport/network.h"
#include "transport/transport.h"

namespace conflux::ofi {

using Clock = transport::Clock;
using Deadline = transport::Deadline;

using AllGather = transport::BlobAllGather;

/// How to build a Transport. Zero / empty fields take their CONFLUX_OFI_* defaults.
struct Options {
  int rank = 0;
  int nranks = 1;
  std::string provider;            ///< e.g. "efa", "tcp;ofi_rxm"; empty: CONFLUX_OFI_PROVIDER, efa, FI_PROVIDER, tcp;ofi_rxm
  std::string localAddress;        ///< address to bind (tcp-like providers), e.g. "127.0.0.1"; empty: CONFLUX_OFI_ADDR
  /// libfabric domains (NICs) to open, one rail each, in this order; empty: CONFLUX_OFI_DOMAINS, and when
  /// that is empty too, the provider's first domain (bound to localAddress when set). The communicator
  /// fills it from the topology: the NICs nearest the rank (core/topology/nic_assignment.h).
  std::vector<std::string> domains;
  int rails = 0;                   ///< endpoints per rank (0: CONFLUX_OFI_RAILS; 0 there too: one per domain)
  size_t chunkBytes = 0;           ///< chunk of a large message (0: CONFLUX_OFI_CHUNK_BYTES)
  int inflight = 0;                ///< chunks in flight per peer, direction and rail (0: CONFLUX_OFI_INFLIGHT)
  int spinUs = -1;                 ///< polling before blocking (-1: CONFLUX_OFI_SPIN_US)
  size_t mrCacheEntries = 0;       ///< registrations cached per domain (0: CONFLUX_OFI_MR_CACHE_ENTRIES)
  std::chrono::milliseconds timeout{0};  ///< default wait deadline (0: CONFLUX_TIMEOUT_MS)
  std::string rma;                 ///< RMA writes: auto, delivery, order, off (empty: CONFLUX_OFI_RMA)
};

/// What the chosen provider offers (reported, logged at INFO, and used to pick code paths).
struct Capabilities {
  std::string provider;            ///< fabric_attr->prov_name, e.g. "tcp;ofi_rxm"
  std::string domain;              ///< domain name of rail 0, e.g. "lo" or "rdmap0s31-rdm"
  std::vector<std::string> railDomains;  ///< domain of each rail
  uint32_t apiVersion = 0;         ///< FI_VERSION requested and accepted
  bool directedRecv = false;       ///< FI_DIRECTED_RECV: receives filter by source address
  bool rma = false;                ///< FI_RMA (write/read) offered
  bool deliveryComplete = false;   ///< FI_DELIVERY_COMPLETE accepted as a transmit flag
  bool orderSendAfterWrite = false;  ///< FI_ORDER_SAW in the endpoint's tx and rx msg_order
  RmaVisibility rmaWrites = RmaVisibility::None;  ///< how iwrite is made visible; None: iwrite unavailable
  std::string rmaUnavailable;      ///< why iwrite is unavailable (empty when it is available)
  bool hmem = false;               ///< FI_HMEM: device buffers may be passed (not used yet)
  uint64_t mrMode = 0;             ///< FI_MR_* bits the provider requires
  bool localMrRequired = false;    ///< FI_MR_LOCAL (or FI_MR_HMEM for device memory): data path registers buffers
  size_t injectSize = 0;           ///< fi_tinject limit
  size_t txSize = 0, rxSize = 0;   ///< provider queue depths (upper bound of posted operations)
  size_t maxMsgSize = 0;
  int rails = 1;
  size_t chunkBytes = 0;           ///< effective chunk size (before growing for huge messages)
  int inflight = 0;                ///< effective per-peer cap
};

namespace detail { struct Op; }

/// One posted send, receive or write (transport/transport.h): cheap to copy, its buffer stays in use until
/// done().
using Request = transport::Request;

/// A registration of [addr, addr+bytes) with one rail's domain, owned by that rail's cache.
struct MemoryRegion {
  void* addr = nullptr;            ///< start of the registered (page-aligned) range
  size_t bytes = 0;
  void* desc = nullptr;            ///< fi_mr_desc, passed with local buffers
  uint64_t key = 0;                ///< remote key (fi_mr_key), for RMA
  uint64_t remoteBase = 0;         ///< what a peer adds offsets to: addr with FI_MR_VIRT_ADDR, else 0
};

/// Counters of one rail's registration cache.
struct MrCacheStats {
  uint64_t hits = 0, misses = 0, evictions = 0;
  size_t entries = 0;
};

class Rail;

/// How one thread of control sleeps in Transport::poll and wait while other threads drive the same
/// Transport: whoever reads a completion wakes every sleeping Waiter through its eventfd, and a Waiter
/// does not sleep while completions it has not seen since its last poll exist. One per caller that
/// blocks (a communicator owns one); never used by two threads at once.
class Waiter {
 public:
  Waiter();  ///< throws Error(SystemError) when no eventfd can be made
  ~Waiter();
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

 private:
  friend class Transport;
  int fd_ = -1;
  uint64_t seen_ = 0;  ///< the Transport's completion count when this Waiter's last poll returned
};

class Transport {
 public:
  /// Opens the endpoints (one per rail), exchanges addresses through `allGather`, fills the address
  /// vectors. Throws Error (InvalidArgument, SystemError naming the libfabric call) on failure.
  static std::unique_ptr<Transport> create(const Options& options, const AllGather& allGather);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  int rails() const { return int(rails_.size()); }
  /// Each rail's NIC and counters (Rail::traffic), read without the lock: any thread, at any time.
  std::vector<transport::RailTraffic> railTraffic() const;
  const Capabilities& capabilities() const { return caps_; }

  /// Starts sending `bytes` from `buf` to `peer` with a user tag (<= kMaxUserTag, see makeUserTag).
  /// The receive must be posted with the same size. Errors come back through the request.
  Request isend(int peer, uint64_t tag, const void* buf, size_t bytes);
  /// Starts receiving exactly `bytes` into `buf` from `peer` with a user tag.
  Request irecv(int peer, uint64_t tag, void* buf, size_t bytes);

  /// Exposes [ptr, ptr+bytes) to remote writes by the peers: registers it for FI_REMOTE_WRITE on every
  /// rail (through the registration cache: a buffer already registered is a hit), pins the registrations
  /// until unexposeMemory, and fills `key`, which the caller ships to the writers. Returns InvalidUsage
  /// naming the provider when iwrite is unavailable (Capabilities::rmaUnavailable), InvalidArgument for
  /// a null buffer or 0 bytes, SystemError when registration fails.
  [[nodiscard]] Status exposeMemory(void* ptr, size_t bytes, RemoteKey* key);
  /// Ends an exposure of this rank: unpins its registrations (they stay cached until evicted). Writes
  /// into it must be over (the caller's protocol says so). InvalidArgument for a key that is not a live
  /// exposure of this rank.
  Status unexposeMemory(const RemoteKey& key);

  /// Starts writing `bytes` from `src` into `peer`'s memory at `dstOffset` inside the region `dst` that
  /// `peer` exposed. Chunked, flow-controlled and striped over the rails like isend (writes share the
  /// per-peer send queue, in post order); done once every chunk's write completed here. Visibility: after
  /// it completes, a tagged message this rank sends to `peer` is not received before the written bytes
  /// are visible in `peer`'s memory (rma.h). The target must keep driving progress (wait, progress, poll)
  /// while it is written to: providers with manual progress (tcp;ofi_rxm) place the data then.
  /// `dstOffset + bytes` beyond the exposed size, a key from another rank or an invalid key fail the
  /// request at once with InvalidArgument; a provider without usable RMA with InvalidUsage naming it.
  /// A 0-byte write completes at once.
  Request iwrite(int peer, const void* src, size_t bytes, const RemoteKey& dst, size_t dstOffset);

  /// Progresses once (no blocking) and tells whether `request` is done.
  bool test(Request& request);
  /// Reads completions and posts queued chunks on every rail, without blocking.
  void progress();
  /// Progresses, then, unless an operation completed since `waiter`'s last poll, blocks on the completion
  /// queues' wait objects until a completion may be ready, another thread read one, or `until` passes (at
  /// most 50 ms; 200 us sleeps without wait objects), then progresses again. For callers that multiplex
  /// several operations (the executor) and check their requests themselves after each poll. Without a
  /// waiter, the Transport's own (one thread at a time).
  void poll(Deadline until, Waiter* waiter = nullptr);

  /// Waits until every request is done or `deadline` passes: spins CONFLUX_OFI_SPIN_US, then blocks on
  /// the completion queues' wait objects. Returns Ok, the first request error (as soon as any request
  /// fails), or Timeout naming the first unfinished peer and operation. After an error or a Timeout the
  /// unfinished requests stay posted: their buffers stay in use until the Transport is destroyed.
  Status wait(std::span<Request> requests, Deadline deadline, Waiter* waiter = nullptr);
  Status wait(std::span<Request> requests) { return wait(requests, defaultDeadline()); }
  Status wait(Request& request, Deadline deadline) { return wait(std::span<Request>(&request, 1), deadline); }
  Status wait(Request& request) { return wait(request, defaultDeadline()); }
  /// now + Options::timeout.
  Deadline defaultDeadline() const { return Clock::now() + timeout_; }

  /// Registers [ptr, ptr+bytes) with `rail`'s domain through its cache (a hit reuses the registration)
  /// and pins the entry until release(). Returns nullptr with `error` set when registration fails.
  MemoryRegion* registerMemory(const void* ptr, size_t bytes, int rail = 0, Status* error = nullptr);
  /// Unpins a region from registerMemory; it stays cached until evicted.
  void release(MemoryRegion* region, int rail = 0);
  MrCacheStats mrCacheStats(int rail = 0) const;
  /// Drops every rail's unpinned registrations overlapping [ptr, ptr+bytes): call before freeing memory
  /// the Transport carried (MrCache caveat: the cache cannot see munmap).
  void invalidate(const void* ptr, size_t bytes);

  /// Takes every tag space (tags.h) no communicator on this rank holds and returns them as a bitmask
  /// (bit s: space s), so that a split running at the same time on another thread cannot pick the same
  /// one; the caller gives back what it does not keep. Space 0 belongs to the Transport's creator.
  uint32_t takeFreeSpaces();
  /// Gives tag spaces back (bits of `mask`).
  void releaseSpaces(uint32_t mask);
  /// Keeps `what` alive until the Transport closes: buffers a communicator that shared this Transport
  /// leaves behind when its failed call may still have operations posted into them.
  void keepUntilClosed(std::shared_ptr<void> what);
  /// keepUntilClosed for the buffers of a failed call: the rails then park, rather than cancel, what is
  /// still posted when they close (Rail::parkIfPosted).
  void keepFailedUntilClosed(std::shared_ptr<void> what);
  /// Runs `farewell(healthy)` first when the Transport closes, while the endpoints still work (the notice
  /// board's closing handshake). `healthy` is false once a call failed on these rails
  /// (keepFailedUntilClosed). The callable must not throw.
  void beforeClose(std::function<void(bool healthy)> farewell);

 private:
  Transport();
  void progressLocked();
  Request post(bool send, int peer, uint64_t tag, void* buf, size_t bytes);
  /// Cuts a validated op into chunks and queues them on the rails (chunk c on rail (c + offset) % rails).
  void submit(const std::shared_ptr<detail::Op>& op, uint32_t railOffset);
  Status timeoutStatus(const detail::Op& op) const;

  int rank_ = 0;
  int nranks_ = 1;
  Capabilities caps_;
  std::chrono::milliseconds timeout_{30000};
  std::chrono::microseconds spin_{50};
  std::vector<std::unique_ptr<Rail>> rails_;
  std::map<uint32_t, std::vector<MemoryRegion*>> exposed_;  ///< by RemoteKey::id: one region per rail
  uint32_t nextExposure_ = 1;
  uint32_t writes_ = 0;  ///< writes started: spreads the first chunk of small writes over the rails

  mutable std::mutex mutex_;        ///< every member above, the rails and the ops' progress
  uint64_t completions_ = 0;        ///< completion entries read so far (Waiter::seen_ compares to it)
  std::vector<Waiter*> sleepers_;   ///< waiters in ppoll: woken when a completion is read
  uint32_t freeSpaces_ = ~uint32_t{1} & ((uint32_t{1} << kMaxTagSpaces) - 1);
  std::unique_ptr<Waiter> ownWaiter_;  ///< for poll/wait without a Waiter
  std::vector<std::shared_ptr<void>> kept_;  ///< keepUntilClosed; freed after the rails close
  bool failedCall_ = false;                  ///< keepFailedUntilClosed was called
  std::function<void(bool)> farewell_;       ///< beforeClose
};

}  // namespace conflux::ofi
