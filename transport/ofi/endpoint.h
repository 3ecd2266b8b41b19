// Rail: one libfabric endpoint of a rank (fabric, domain, completion queue, address vector, endpoint),
// its registration cache, and the flow control of the chunks it carries.
//
// Flow control: operations wait in per-peer FIFO queues (one for sends and RMA writes, one for receives);
// progress() posts their chunks round robin over peers while (a) the peer has fewer than `inflight` chunks
// posted in that direction (receives: one more, for the failure notices' standing receive) and (b) the
// rail has fewer than the provider's tx_attr->size / rx_attr->size posted. -FI_EAGAIN stops posting until the next progress() (which reads completions first). Chunks of
// one queue are posted in order, so equal tags match in the order the caller posted them.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transport/ofi/fabric.h"
#include "transport/ofi/memory.h"
#include "transport/ofi/op.h"

namespace conflux::ofi {

struct RailConfig {
  int rank = 0;
  int nranks = 1;
  int index = 0;       ///< this rail's number
  int rails = 1;       ///< rails per rank
  int inflight = 8;    ///< chunks posted per peer and direction (receives: one more, see pumpPeer)
  size_t mrCacheEntries = 128;
  uint64_t writeFlags = 0;  ///< fi_writemsg flags: FI_COMPLETION (+ FI_DELIVERY_COMPLETE, see rma.h)
};

class Rail {
 public:
  /// Opens fabric, domain, CQ (FI_WAIT_FD when offered), AV (FI_AV_TABLE), endpoint; enables it.
  Rail(const fi_info* info, const RailConfig& config);
  ~Rail();
  /// A call on this rail failed: at close, operations still posted park the rail's objects instead of
  /// being cancelled and drained (closing over a broken connection is where libfabric 1.17 crashed and
  /// leaks; parked objects stay reachable until exit).
  void parkIfPosted() { drainOnClose_ = false; }
  Rail(const Rail&) = delete;
  Rail& operator=(const Rail&) = delete;

  /// This endpoint's address (fi_getname).
  std::vector<uint8_t> address() const;
  /// Inserts every rank's address, in rank order, so that fi_addr == rank.
  void insertPeers(const std::vector<std::vector<uint8_t>>& addresses);

  /// Queues the op's chunks first, first + rails, ... on this rail and posts what flow control allows.
  void enqueue(const std::shared_ptr<detail::Op>& op, uint32_t firstChunk);
  /// Reads completions, then posts queued chunks. Returns the number of completions read plus the chunks
  /// that finished or failed at posting (fi_tinject, post errors) since the last call: anything another
  /// thread may be waiting for.
  int progress();
  /// Ends every queued or posted op with `status` (used before the rail is closed).
  void abortAll(const Status& status);

  // Blocking support (progress.cc).
  int waitFd() const { return waitFd_; }
  fid_fabric* fabric() const { return fabric_.get(); }
  fid* cqFid() const { return &cq_->fid; }

  MrCache& mrCache() { return *mrCache_; }
  const fi_info* info() const { return info_.get(); }
  bool directedRecv() const { return directedRecv_; }
  bool localMrRequired() const { return needLocalMr_; }
  size_t injectSize() const { return injectSize_; }
  size_t txCap() const { return txCap_; }
  size_t rxCap() const { return rxCap_; }

  /// What this rail moved, for the metrics: bytes of the chunks that completed (sends, writes and
  /// injects as sent), and posts the provider refused with -FI_EAGAIN (posted again later). Written
  /// under the Transport's lock (a relaxed load and store), read by a scrape from any thread.
  struct Traffic {
    std::atomic<uint64_t> sentBytes{0}, receivedBytes{0}, retries{0};
  };
  const Traffic& traffic() const { return traffic_; }
  /// The NIC this rail's endpoint drives (the provider's device name, else its domain name).
  const std::string& nicName() const { return nicName_; }

 private:
  static void add(std::atomic<uint64_t>& a, uint64_t v) {
    a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
  }
  struct Slot {
    fi_context2 ctx;  ///< first member: the Slot is every operation's context (FI_CONTEXT2 space)
    std::shared_ptr<detail::Op> op;
    uint32_t chunk = 0;
    Slot* nextFree = nullptr;
  };
  struct Pending {
    std::shared_ptr<detail::Op> op;
    uint32_t next;   ///< next chunk to post on this rail
  };
  struct Peer {
    std::deque<Pending> queue[2];  ///< [0] receives, [1] sends
    uint32_t posted[2] = {0, 0};
    bool active = false;           ///< listed in active_
  };
  enum class PostResult { Posted, Full, Again, Failed };

  void pumpAll();
  /// Posts what it can from peer p's queues; returns false when the rail is out of room.
  bool pumpPeer(int p, bool full[2]);
  PostResult postChunk(const std::shared_ptr<detail::Op>& op, uint32_t chunk);
  /// fi_writemsg of chunk `chunk` of a write (rma.cc).
  ssize_t writeChunk(const detail::Op& op, uint32_t chunk, void* buf, size_t len, void* desc, fi_addr_t addr,
                     Slot* slot);
  void activate(int p);
  void completeSlot(Slot* slot);
  void failSlot(Slot* slot, Status status);
  Slot* takeSlot();
  void putSlot(Slot* slot);
  int readCompletions();  // progress.cc
  bool anyPosted() const;
  /// Cancels every posted operation and reads completions until none is posted or `limit` passed;
  /// true when none is posted any more (the rail's objects can then close).
  bool cancelAndDrain(std::chrono::milliseconds limit);
  void handleCqError();   // progress.cc

  RailConfig cfg_;
  InfoPtr info_;
  Fid<fid_fabric> fabric_;
  Fid<fid_domain> domain_;
  Fid<fid_cq> cq_;
  Fid<fid_av> av_;
  Fid<fid_ep> ep_;
  std::unique_ptr<MrCache> mrCache_;
  int waitFd_ = -1;
  bool directedRecv_ = false;
  bool needLocalMr_ = false;
  size_t injectSize_ = 0;
  size_t txCap_ = 0, rxCap_ = 0;
  bool drainOnClose_ = true;
  size_t posted_[2] = {0, 0};     ///< receives, sends posted on this rail
  bool again_ = false;            ///< -FI_EAGAIN seen since the last completion read
  int finishedWithoutEntry_ = 0;  ///< chunks finished at posting since the last progress()
  std::vector<fi_addr_t> addrs_;  ///< by rank
  std::vector<Peer> peers_;
  std::deque<int> active_;        ///< peers with queued work
  std::vector<Slot> slots_;
  Slot* freeSlots_ = nullptr;
  Traffic traffic_;
  std::string nicName_;
};

}  // namespace conflux::ofi
