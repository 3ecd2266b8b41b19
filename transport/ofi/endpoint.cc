#include "transport/ofi/endpoint.h"

#include "transport/ofi/cq_drain.h"

#include <rdma/fi_errno.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/log.h"
#include "transport/ofi/cq_drain.h"
#include "transport/ofi/memory.h"
#include "transport/ofi/tags.h"

namespace conflux::ofi {

void detail::Op::releaseMrs() {
  for (int r = 0; r < kMaxRails; ++r) {
    if (mr[r] != nullptr) mrCache[r]->release(mr[r]);
    mr[r] = nullptr;
  }
}

std::string describeOp(const detail::Op& op, int selfRank) {
  char buf[160];
  if (op.write) {
    std::snprintf(buf, sizeof buf, "ofi rank %d: write to rank %d (%zu bytes at offset %zu)", selfRank, op.peer,
                  op.bytes, op.dstOffset);
  } else {
    std::snprintf(buf, sizeof buf, "ofi rank %d: %s rank %d (tag 0x%" PRIx64 ", %zu bytes)", selfRank, op.verb(),
                  op.peer, op.userTag, op.bytes);
  }
  return buf;
}

Rail::Rail(const fi_info* info, const RailConfig& config) : cfg_(config), info_(fi_dupinfo(info)) {
  if (!info_) throw Error(Code::SystemError, "ofi: fi_dupinfo failed");
  fid_fabric* fabric = nullptr;
  checkFi(fi_fabric(info_->fabric_attr, &fabric, nullptr), "fi_fabric");
  fabric_.reset(fabric);
  fid_domain* domain = nullptr;
  checkFi(fi_domain(fabric, info_.get(), &domain, nullptr), "fi_domain");
  domain_.reset(domain);

  txCap_ = info_->tx_attr->size ? info_->tx_attr->size : 256;
  rxCap_ = info_->rx_attr->size ? info_->rx_attr->size : 256;
  injectSize_ = info_->tx_attr->inject_size;
  directedRecv_ = (info_->caps & FI_DIRECTED_RECV) != 0;
  const uint64_t mrMode = info_->domain_attr->mr_mode;
  needLocalMr_ = (mrMode & FI_MR_LOCAL) != 0;
  const fid_nic* nic = info_->nic;
  if (nic != nullptr && nic->device_attr != nullptr && nic->device_attr->name != nullptr) nicName_ = nic->device_attr->name;
  else if (info_->domain_attr->name != nullptr) nicName_ = info_->domain_attr->name;

  fi_cq_attr cqAttr{};
  cqAttr.format = FI_CQ_FORMAT_TAGGED;
  cqAttr.size = txCap_ + rxCap_;
  cqAttr.wait_obj = FI_WAIT_FD;
  fid_cq* cq = nullptr;
  int rc = fi_cq_open(domain, &cqAttr, &cq, nullptr);
  if (rc != 0) {
    CFX_INFO(kNet, "ofi: %s has no FI_WAIT_FD completion queue (%s); waits will poll and sleep",
             info_->fabric_attr->prov_name, fi_strerror(-rc));
    cqAttr.wait_obj = FI_WAIT_NONE;
    checkFi(fi_cq_open(domain, &cqAttr, &cq, nullptr), "fi_cq_open");
  }
  cq_.reset(cq);
  if (cqAttr.wait_obj == FI_WAIT_FD && fi_control(&cq->fid, FI_GETWAIT, &waitFd_) != 0) waitFd_ = -1;

  fi_av_attr avAttr{};
  avAttr.type = FI_AV_TABLE;
  avAttr.count = size_t(cfg_.nranks);
  fid_av* av = nullptr;
  checkFi(fi_av_open(domain, &avAttr, &av, nullptr), "fi_av_open");
  av_.reset(av);

  fid_ep* ep = nullptr;
  checkFi(fi_endpoint(domain, info_.get(), &ep, nullptr), "fi_endpoint");
  ep_.reset(ep);
  checkFi(fi_ep_bind(ep, &av->fid, 0), "fi_ep_bind(av)");
  checkFi(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  checkFi(fi_enable(ep), "fi_enable");

  uint64_t access = FI_SEND | FI_RECV;
  if ((info_->caps & FI_RMA) != 0) access |= FI_WRITE | FI_REMOTE_WRITE;
  mrCache_ = std::make_unique<MrCache>(domain, ep, mrMode, access, cfg_.mrCacheEntries);

  peers_.resize(size_t(cfg_.nranks));
  slots_.resize(txCap_ + rxCap_);
  for (Slot& s : slots_) putSlot(&s);
}

namespace {

/// libfabric objects that could not be closed safely, kept (and reachable) until the process exits.
struct Parked {
  Fid<fid_fabric> fabric;
  Fid<fid_domain> domain;
  Fid<fid_cq> cq;
  Fid<fid_av> av;
  Fid<fid_ep> ep;
  std::unique_ptr<MrCache> mrCache;
};
std::mutex parkedMutex;
std::vector<Parked>* parked = new std::vector<Parked>();  // never destroyed, on purpose

}  // namespace

bool Rail::anyPosted() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const Slot& slot) { return static_cast<bool>(slot.op); });
}

bool Rail::cancelAndDrain(std::chrono::milliseconds limit) {
  for (Slot& slot : slots_) {
    if (slot.op) fi_cancel(&ep_->fid, &slot);
  }
  // Each cancelled operation completes (FI_ECANCELED) or finishes on its own; either frees its slot. Its
  // operation already failed (abortAll), so nothing more is told to it.
  auto release = [&](void* context) {
    auto* slot = static_cast<Slot*>(context);
    if (slot == nullptr || !slot->op) return;
    const int dir = slot->op->send ? 1 : 0;
    --posted_[dir];
    --peers_[size_t(slot->op->peer)].posted[dir];
    putSlot(slot);
  };
  const auto until = std::chrono::steady_clock::now() + limit;
  while (anyPosted() && std::chrono::steady_clock::now() < until) {
    bool broken = false;
    const int n = drainCompletions(
        cq_.get(), [&](const fi_cq_tagged_entry& e) { release(e.op_context); },
        [&] {
          fi_cq_err_entry err{};
          if (fi_cq_readerr(cq_.get(), &err, 0) >= 0) release(err.op_context);
        },
        [&](int) { broken = true; });
    if (broken) break;
    if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return !anyPosted();
}

Rail::~Rail() {
  abortAll(Status(Code::Aborted, "ofi: transport closed"));
  // Receives still posted when a healthy communicator goes (the failure notices wait for a word that
  // never came) are cancelled and their completions read, so that the objects close: kept open, each
  // communicator over libfabric cost about ten descriptors and an endpoint's memory until the process ended.
  // After a failed call (parkIfPosted) they are parked as before.
  if (!anyPosted() || (drainOnClose_ && cancelAndDrain(std::chrono::milliseconds(200)))) return;  // members close in reverse order
  // Operations are still posted (a call failed on a broken link, a dead or stopped peer, and the cancels
  // did not complete: rxm completes neither a send to such a peer nor a receive it matched): closing an rxm endpoint then crashed inside libfabric 1.17 (about one Netns.fault_link_down
  // run in six). The endpoint and everything it depends on are parked instead; a communicator that failed
  // this way is being torn down, and the process releases them when it exits.
  // Cancelled receives leave the provider's match list, so nothing is written into the caller's buffers
  // later; progress is manual, so nothing runs on the parked objects unless someone calls into them.
  Parked p;
  p.mrCache = std::move(mrCache_);
  p.ep = std::move(ep_);
  p.av = std::move(av_);
  p.cq = std::move(cq_);
  p.domain = std::move(domain_);
  p.fabric = std::move(fabric_);
  std::lock_guard<std::mutex> lock(parkedMutex);
  parked->push_back(std::move(p));
  CFX_INFO(kNet, "ofi rank %d: rail %d closed with operations still posted; its libfabric objects stay open", cfg_.rank,
           cfg_.index);
}

std::vector<uint8_t> Rail::address() const {
  std::vector<uint8_t> name(256);
  size_t len = name.size();
  int rc = fi_getname(&ep_->fid, name.data(), &len);
  if (rc == -FI_ETOOSMALL) {
    name.resize(len);
    rc = fi_getname(&ep_->fid, name.data(), &len);
  }
  checkFi(rc, "fi_getname");
  name.resize(len);
  return name;
}

void Rail::insertPeers(const std::vector<std::vector<uint8_t>>& addresses) {
  addrs_.assign(addresses.size(), FI_ADDR_NOTAVAIL);
  for (size_t r = 0; r < addresses.size(); ++r) {
    fi_addr_t out = FI_ADDR_NOTAVAIL;
    int n = fi_av_insert(av_.get(), addresses[r].data(), 1, &out, 0, nullptr);
    if (n != 1) {
      throw Error(Code::SystemError, "ofi: fi_av_insert of rank " + std::to_string(r) + "'s address on rail " +
                                         std::to_string(cfg_.index) + " failed (" + std::to_string(n) + ")");
    }
    addrs_[r] = out;
  }
}

Rail::Slot* Rail::takeSlot() {
  Slot* s = freeSlots_;
  if (s != nullptr) freeSlots_ = s->nextFree;
  return s;
}

void Rail::putSlot(Slot* slot) {
  slot->op.reset();
  slot->nextFree = freeSlots_;
  freeSlots_ = slot;
}

void Rail::activate(int p) {
  if (!peers_[size_t(p)].active) {
    peers_[size_t(p)].active = true;
    active_.push_back(p);
  }
}

void Rail::enqueue(const std::shared_ptr<detail::Op>& op, uint32_t firstChunk) {
  Peer& peer = peers_[size_t(op->peer)];
  peer.queue[op->send ? 1 : 0].push_back({op, firstChunk});
  activate(op->peer);
  if (!again_) {
    bool full[2] = {false, false};
    pumpPeer(op->peer, full);
  }
}

Rail::PostResult Rail::postChunk(const std::shared_ptr<detail::Op>& opRef, uint32_t c) {
  detail::Op& op = *opRef;
  const int dir = op.send ? 1 : 0;
  const size_t len = op.chunkLen(c);
  uint8_t* p = op.buf + (len ? op.chunkOffset(c) : 0);
  const fi_addr_t addr = addrs_[size_t(op.peer)];
  const uint64_t tag = wireTag(op.send ? cfg_.rank : op.peer, op.userTag, c);

  if (op.send && !op.write && op.nchunks == 1 && len <= injectSize_) {
    ssize_t rc = fi_tinject(ep_.get(), p, len, addr, tag);
    if (rc == -FI_EAGAIN) {
      add(traffic_.retries, 1);
      return PostResult::Again;
    }
    ++op.outstanding;
    ++finishedWithoutEntry_;  // done (or failed) here: no completion entry will say so
    if (rc == 0) {
      add(traffic_.sentBytes, len);
      op.chunkDone(len);
      return PostResult::Posted;
    }
    --op.outstanding;
    op.fail(Status(Code::SystemError, describeOp(op, cfg_.rank) + ": " + fiErrorMessage("fi_tinject", int(rc))));
    return PostResult::Failed;
  }

  if (posted_[dir] >= (dir ? txCap_ : rxCap_)) return PostResult::Full;
  Slot* slot = takeSlot();
  if (slot == nullptr) return PostResult::Full;
  void* desc = nullptr;
  if (needLocalMr_ && op.bytes > 0) {
    const int r = cfg_.index;
    if (op.mr[r] == nullptr) {
      Status err;
      op.mr[r] = mrCache_->acquire(op.buf, op.bytes, &err);
      if (op.mr[r] == nullptr) {
        putSlot(slot);
        ++finishedWithoutEntry_;
        op.fail(Status(err.code(), describeOp(op, cfg_.rank) + ": " + err.message()));
        return PostResult::Failed;
      }
      op.mrCache[r] = mrCache_.get();
    }
    desc = op.mr[r]->desc;
  }
  ssize_t rc = op.write  ? writeChunk(op, c, p, len, desc, addr, slot)
               : op.send ? fi_tsend(ep_.get(), p, len, desc, addr, tag, slot)
                         : fi_trecv(ep_.get(), p, len, desc, directedRecv_ ? addr : FI_ADDR_UNSPEC, tag, 0, slot);
  if (rc == 0) {
    slot->op = opRef;
    slot->chunk = c;
    ++op.outstanding;
    ++posted_[dir];
    ++peers_[size_t(op.peer)].posted[dir];
    return PostResult::Posted;
  }
  putSlot(slot);
  if (rc == -FI_EAGAIN) {
    add(traffic_.retries, 1);
    return PostResult::Again;
  }
  const char* call = op.write ? "fi_writemsg" : op.send ? "fi_tsend" : "fi_trecv";
  ++finishedWithoutEntry_;
  op.fail(Status(Code::SystemError, describeOp(op, cfg_.rank) + ": " + fiErrorMessage(call, int(rc))));
  return PostResult::Failed;
}

bool Rail::pumpPeer(int p, bool full[2]) {
  Peer& peer = peers_[size_t(p)];
  for (int dir : {1, 0}) {
    auto& q = peer.queue[dir];
    while (!q.empty() && !full[dir]) {
      Pending& pe = q.front();
      detail::Op& op = *pe.op;
      if (op.failed || op.done || pe.next >= op.nchunks) {
        q.pop_front();
        continue;
      }
      // Receives get one more: the failure notices' board (notice_board.h) keeps one posted to every peer
      // for as long as the endpoints live, and with CONFLUX_OFI_INFLIGHT=1 it would otherwise take the
      // only one, so that no data from that peer could ever be received.
      if (peer.posted[dir] >= uint32_t(cfg_.inflight) + (dir == 0 ? 1u : 0u)) break;
      switch (postChunk(pe.op, pe.next)) {
        case PostResult::Posted: pe.next += uint32_t(cfg_.rails); break;
        case PostResult::Failed: q.pop_front(); break;
        case PostResult::Full: full[dir] = true; break;
        case PostResult::Again: again_ = true; return false;
      }
    }
  }
  return true;
}

void Rail::pumpAll() {
  bool full[2] = {false, false};
  for (size_t n = active_.size(); n > 0 && !again_ && !(full[0] && full[1]); --n) {
    const int p = active_.front();
    active_.pop_front();
    pumpPeer(p, full);
    Peer& peer = peers_[size_t(p)];
    if (peer.queue[0].empty() && peer.queue[1].empty()) {
      peer.active = false;
    } else {
      active_.push_back(p);
    }
  }
}

int Rail::progress() {
  const int n = readCompletions();
  again_ = false;
  if (!active_.empty()) pumpAll();
  const int finished = n + finishedWithoutEntry_;
  finishedWithoutEntry_ = 0;
  return finished;
}

void Rail::completeSlot(Slot* slot) {
  std::shared_ptr<detail::Op> op = std::move(slot->op);
  const int dir = op->send ? 1 : 0;
  --posted_[dir];
  --peers_[size_t(op->peer)].posted[dir];
  const size_t len = op->chunkLen(slot->chunk);
  add(op->send ? traffic_.sentBytes : traffic_.receivedBytes, len);
  putSlot(slot);
  op->chunkDone(len);
}

void Rail::failSlot(Slot* slot, Status status) {
  std::shared_ptr<detail::Op> op = std::move(slot->op);
  const int dir = op->send ? 1 : 0;
  --posted_[dir];
  --peers_[size_t(op->peer)].posted[dir];
  putSlot(slot);
  --op->outstanding;
  op->fail(std::move(status));
}

void Rail::abortAll(const Status& status) {
  auto end = [&](const std::shared_ptr<detail::Op>& op) {
    if (!op || op->done) return;
    op->outstanding = 0;
    op->fail(status);
  };
  for (Slot& s : slots_) end(s.op);
  for (Peer& peer : peers_) {
    for (auto& q : peer.queue) {
      for (Pending& pe : q) end(pe.op);
      q.clear();
    }
  }
  active_.clear();
}

}  // namespace conflux::ofi
