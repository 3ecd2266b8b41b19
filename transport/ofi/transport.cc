#include "transport/ofi/transport.h"

#include <rdma/fi_errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "core/config.h"
#include "core/log.h"
#include "transport/ofi/endpoint.h"
#include "transport/ofi/fabric.h"
#include "transport/ofi/progress.h"
#include "transport/ofi/rails.h"

namespace conflux::ofi {

Waiter::Waiter() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) throw Error(Code::SystemError, "ofi: eventfd for a waiter failed: errno " + std::to_string(errno));
}

Waiter::~Waiter() { ::close(fd_); }

namespace {

// Address blob exchanged by allGather: magic, version, rails, then per rail a length and a fixed slot.
constexpr uint32_t kMagic = 0x4f584643;  // "CFXO"
// The version of what ranks send each other: 2 since progress notices (notice_board.h) share the failure
// notices' receives, 3 since goodbyes do; ranks of builds with different versions would misread each
// other's notices.
constexpr uint16_t kVersion = 3;
constexpr size_t kNameSlot = 256;
constexpr size_t kHeader = 8;

std::vector<uint8_t> packAddresses(const std::vector<std::vector<uint8_t>>& names) {
  std::vector<uint8_t> blob(kHeader + names.size() * (4 + kNameSlot), 0);
  const uint16_t rails = uint16_t(names.size());
  std::memcpy(blob.data(), &kMagic, 4);
  std::memcpy(blob.data() + 4, &kVersion, 2);
  std::memcpy(blob.data() + 6, &rails, 2);
  for (size_t r = 0; r < names.size(); ++r) {
    if (names[r].size() > kNameSlot) throw Error(Code::InternalError, "ofi: endpoint address too long");
    const uint32_t len = uint32_t(names[r].size());
    uint8_t* slot = blob.data() + kHeader + r * (4 + kNameSlot);
    std::memcpy(slot, &len, 4);
    std::memcpy(slot + 4, names[r].data(), len);
  }
  return blob;
}

int64_t positiveOr(int64_t value, config::Var var) { return value > 0 ? value : config::getInt(var); }

// "a, b,c" -> {"a", "b", "c"}; empty items are dropped.
std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(pos, end - pos);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
    pos = end + 1;
  }
  return out;
}

}  // namespace

Transport::Transport() : ownWaiter_(std::make_unique<Waiter>()) {}

Transport::~Transport() {
  if (farewell_) {
    bool healthy = false;
    {
      std::lock_guard lock(mutex_);
      healthy = !failedCall_;
    }
    farewell_(healthy);
  }
  // End every op on every rail first: an op may hold registrations from several rails' caches.
  for (auto& rail : rails_) rail->abortAll(Status(Code::Aborted, "ofi: transport closed"));
  rails_.clear();
  kept_.clear();
}

std::unique_ptr<Transport> Transport::create(const Options& options, const AllGather& allGather) {
  if (options.nranks < 1 || options.nranks > kMaxRanks || options.rank < 0 || options.rank >= options.nranks) {
    throw Error(Code::InvalidArgument, "ofi: rank " + std::to_string(options.rank) + " of " +
                                           std::to_string(options.nranks) + " is out of range");
  }
  std::unique_ptr<Transport> t(new Transport());
  t->rank_ = options.rank;
  t->nranks_ = options.nranks;
  const int64_t timeoutMs = options.timeout.count() > 0 ? options.timeout.count()
                                                        : config::getInt(config::Var::TIMEOUT_MS);
  t->timeout_ = std::chrono::milliseconds(timeoutMs);
  t->spin_ = std::chrono::microseconds(options.spinUs >= 0 ? options.spinUs
                                                            : config::getInt(config::Var::OFI_SPIN_US));

  applyProviderDefaults();
  InfoRequest request;
  request.provider = chooseProvider(options.provider);
  const std::vector<std::string> wanted =
      options.domains.empty() ? splitList(config::getString(config::Var::OFI_DOMAINS)) : options.domains;
  // Named domains bring their own addresses; otherwise bind where asked.
  if (wanted.empty()) {
    request.localAddress = options.localAddress.empty() ? config::getString(config::Var::OFI_ADDR)
                                                        : options.localAddress;
  }
  InfoPtr list = getInfo(request);
  const std::vector<fi_info*> offered = distinctDomains(list.get());
  // Without named domains every rail uses the provider's first domain: the others may not reach other
  // nodes at all (tcp lists "lo" as a domain).
  const std::vector<fi_info*> domains =
      wanted.empty() ? std::vector<fi_info*>{offered.front()} : selectDomains(offered, wanted, request.provider);
  int rails = options.rails > 0 ? options.rails : int(config::getInt(config::Var::OFI_RAILS));
  if (rails <= 0) rails = int(domains.size());
  if (rails < 1 || rails > kMaxRails) {
    throw Error(Code::InvalidArgument, "ofi: rails must be 1.." + std::to_string(kMaxRails) + " (got " +
                                           std::to_string(rails) + (wanted.empty() ? "" : " from the domains") + ")");
  }

  // How iwrite is made visible before later messages (rma.h); decided before the rails open because
  // each rail posts its writes with the matching flags.
  const fi_info* first = domains[0];
  Capabilities& c = t->caps_;
  c.provider = first->fabric_attr->prov_name ? first->fabric_attr->prov_name : "";
  const uint64_t writeCaps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
  c.rma = (first->caps & writeCaps) == writeCaps;
  c.deliveryComplete = c.rma && offersDeliveryComplete(request, first->caps);
  c.orderSendAfterWrite = (first->tx_attr->msg_order & FI_ORDER_SAW) != 0 &&
                          (first->rx_attr->msg_order & FI_ORDER_SAW) != 0;
  const RmaChoice rma = chooseRmaVisibility(
      options.rma.empty() ? config::getString(config::Var::OFI_RMA) : options.rma, c.provider, c.rma,
      c.deliveryComplete, c.orderSendAfterWrite, rails);
  c.rmaWrites = rma.visibility;
  c.rmaUnavailable = rma.unavailable;

  RailConfig rc;
  rc.rank = options.rank;
  rc.nranks = options.nranks;
  rc.rails = rails;
  rc.inflight = std::max(1, int(positiveOr(options.inflight, config::Var::OFI_INFLIGHT)));
  rc.mrCacheEntries = size_t(positiveOr(int64_t(options.mrCacheEntries), config::Var::OFI_MR_CACHE_ENTRIES));
  rc.writeFlags = FI_COMPLETION | (c.rmaWrites == RmaVisibility::DeliveryComplete ? FI_DELIVERY_COMPLETE : 0);
  std::vector<std::vector<uint8_t>> names;
  for (int r = 0; r < rails; ++r) {
    rc.index = r;
    const fi_info* info = domains[size_t(r) % domains.size()];
    t->rails_.push_back(std::make_unique<Rail>(info, rc));
    t->caps_.railDomains.push_back(describeDomain(info).name);
    names.push_back(t->rails_.back()->address());
  }

  // Exchange addresses: every rank must have the same number of rails.
  const std::vector<uint8_t> mine = packAddresses(names);
  const std::vector<uint8_t> all = allGather(mine);
  if (all.size() != mine.size() * size_t(options.nranks)) {
    throw Error(Code::InvalidUsage, "ofi: address exchange returned " + std::to_string(all.size()) +
                                        " bytes, expected " + std::to_string(mine.size() * size_t(options.nranks)) +
                                        " (do all ranks use " + std::to_string(rails) + " rails?)");
  }
  for (int r = 0; r < rails; ++r) {
    std::vector<std::vector<uint8_t>> peerNames(size_t(options.nranks));
    for (int p = 0; p < options.nranks; ++p) {
      const uint8_t* blob = all.data() + size_t(p) * mine.size();
      uint32_t magic = 0, len = 0;
      uint16_t peerRails = 0;
      std::memcpy(&magic, blob, 4);
      std::memcpy(&peerRails, blob + 6, 2);
      uint16_t version = 0;
      std::memcpy(&version, blob + 4, 2);
      if (magic == kMagic && version != kVersion) {
        throw Error(Code::InvalidUsage, "ofi: rank " + std::to_string(p) + " runs a Conflux build that speaks version " +
                                            std::to_string(version) + " between ranks, this one " +
                                            std::to_string(kVersion) + ": every rank must run the same build");
      }
      if (magic != kMagic || peerRails != rails) {
        throw Error(Code::InvalidUsage, "ofi: rank " + std::to_string(p) + " sent a bad address record (" +
                                            std::to_string(peerRails) + " rails, expected " +
                                            std::to_string(rails) + ")");
      }
      const uint8_t* slot = blob + kHeader + size_t(r) * (4 + kNameSlot);
      std::memcpy(&len, slot, 4);
      if (len > kNameSlot) throw Error(Code::InvalidUsage, "ofi: rank " + std::to_string(p) + " address too long");
      peerNames[size_t(p)].assign(slot + 4, slot + 4 + len);
    }
    t->rails_[size_t(r)]->insertPeers(peerNames);
  }

  const Rail& r0 = *t->rails_[0];
  const fi_info* info = r0.info();
  c.domain = info->domain_attr->name ? info->domain_attr->name : "";
  c.apiVersion = requestedApiVersion();
  c.directedRecv = r0.directedRecv();
  c.hmem = (info->caps & FI_HMEM) != 0;
  c.mrMode = info->domain_attr->mr_mode;
  c.localMrRequired = r0.localMrRequired();
  c.injectSize = r0.injectSize();
  c.txSize = r0.txCap();
  c.rxSize = r0.rxCap();
  c.maxMsgSize = info->ep_attr->max_msg_size;
  c.rails = rails;
  c.chunkBytes = size_t(positiveOr(int64_t(options.chunkBytes), config::Var::OFI_CHUNK_BYTES));
  c.inflight = rc.inflight;
  CFX_INFO(kNet,
           "ofi rank %d: provider %s domain %s api %u.%u rails %d (%zu domains) directed_recv %d rma %d "
           "(delivery_complete %d order_saw %d: writes %s) mr_mode 0x%" PRIx64 " inject %zu tx %zu rx %zu chunk %zu "
           "inflight %d",
           t->rank_, c.provider.c_str(), c.domain.c_str(), FI_MAJOR(c.apiVersion), FI_MINOR(c.apiVersion), rails,
           domains.size(), int(c.directedRecv), int(c.rma), int(c.deliveryComplete), int(c.orderSendAfterWrite),
           rmaVisibilityName(c.rmaWrites), c.mrMode, c.injectSize, c.txSize, c.rxSize, c.chunkBytes, c.inflight);
  if (c.rmaWrites == RmaVisibility::None) CFX_INFO(kNet, "ofi rank %d: %s", t->rank_, c.rmaUnavailable.c_str());
  return t;
}

Request Transport::post(bool send, int peer, uint64_t tag, void* buf, size_t bytes) {
  std::lock_guard lock(mutex_);
  auto op = std::make_shared<detail::Op>();
  op->send = send;
  op->peer = peer;
  op->userTag = tag;
  op->buf = static_cast<uint8_t*>(buf);
  op->bytes = bytes;
  op->start = Clock::now();
  if (peer < 0 || peer >= nranks_ || tag > kMaxUserTag || (buf == nullptr && bytes > 0)) {
    op->fail(Status(Code::InvalidArgument,
                    describeOp(*op, rank_) + ": invalid peer, tag (max " + std::to_string(kMaxUserTag) +
                        ") or buffer"));
    return Request(std::move(op));
  }
  submit(op, railOffset(tag, rails()));
  return Request(std::move(op));
}

void Transport::submit(const std::shared_ptr<detail::Op>& op, uint32_t offset) {
  op->chunkBytes = chunkSizeFor(op->bytes, caps_.chunkBytes, caps_.maxMsgSize);
  op->nchunks = chunkCount(op->bytes, op->chunkBytes);
  const int n = rails();
  op->railOffset = offset;
  for (int r = 0; r < n && !op->done; ++r) {
    const uint32_t first = firstChunkOnRail(r, n, op->railOffset, op->nchunks);
    if (first < op->nchunks) rails_[size_t(r)]->enqueue(op, first);
  }
}

Request Transport::isend(int peer, uint64_t tag, const void* buf, size_t bytes) {
  return post(true, peer, tag, const_cast<void*>(buf), bytes);
}

Request Transport::irecv(int peer, uint64_t tag, void* buf, size_t bytes) { return post(false, peer, tag, buf, bytes); }

std::vector<transport::RailTraffic> Transport::railTraffic() const {
  std::vector<transport::RailTraffic> out;
  for (size_t i = 0; i < rails_.size(); ++i) {
    const Rail::Traffic& t = rails_[i]->traffic();
    out.push_back({int(i), rails_[i]->nicName(), t.sentBytes.load(std::memory_order_relaxed),
                   t.receivedBytes.load(std::memory_order_relaxed), t.retries.load(std::memory_order_relaxed)});
  }
  return out;
}

void Transport::progressLocked() {
  uint64_t read = 0;
  for (auto& rail : rails_) read += uint64_t(rail->progress());
  if (read == 0) return;
  completions_ += read;
  // Threads asleep in poll may be waiting for exactly these completions.
  const uint64_t one = 1;
  for (Waiter* w : sleepers_) {
    if (::write(w->fd_, &one, sizeof one) < 0 && errno != EAGAIN) {
      CFX_WARN(kNet, "ofi rank %d: waking a waiter failed: errno %d", rank_, errno);
    }
  }
}

void Transport::progress() {
  std::lock_guard lock(mutex_);
  progressLocked();
}

void Transport::poll(Deadline until, Waiter* given) {
  Waiter& waiter = given != nullptr ? *given : *ownWaiter_;
  std::unique_lock lock(mutex_);
  progressLocked();
  // Something completed since this waiter last looked (maybe read by another thread): let it check.
  if (completions_ != waiter.seen_) {
    waiter.seen_ = completions_;
    return;
  }
  SleepSet set;
  if (armRails(rails_, set)) {
    set.fds[set.count++] = pollfd{waiter.fd_, POLLIN, 0};
    sleepers_.push_back(&waiter);
    lock.unlock();
    sleepOn(set, until);
    lock.lock();
    sleepers_.erase(std::find(sleepers_.begin(), sleepers_.end(), &waiter));
    uint64_t drained = 0;
    while (::read(waiter.fd_, &drained, sizeof drained) > 0) {
    }
  }
  progressLocked();
  waiter.seen_ = completions_;
}

bool Transport::test(Request& request) {
  if (!request.done()) progress();
  return request.done();
}

Status Transport::timeoutStatus(const detail::Op& op) const {
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - op.start).count();
  return Status(Code::Timeout, describeOp(op, rank_) + " timed out after " + std::to_string(waited) + " ms (" +
                                   std::to_string(op.completed) + "/" + std::to_string(op.nchunks) +
                                   " chunks done; is rank " + std::to_string(op.peer) +
                                   (op.write ? " alive and driving progress?)" : " alive and posting?)"));
}

Status Transport::wait(std::span<Request> requests, Deadline deadline, Waiter* waiter) {
  const Deadline spinUntil = Clock::now() + spin_;
  // Each step takes the lock on its own, so that other threads driving this Transport get their turn.
  for (;;) {
    bool allDone = true;
    for (Request& r : requests) allDone = allDone && r.done();
    if (allDone) break;
    // A failed operation ends the wait at once (its other chunks may still be posted).
    for (Request& r : requests) {
      if (r.failed()) return r.state()->status;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      std::lock_guard lock(mutex_);
      for (Request& r : requests) {
        if (!r.done()) return timeoutStatus(*static_cast<const detail::Op*>(r.state()));
      }
      continue;
    }
    if (now < spinUntil) {
      progress();
    } else {
      poll(deadline, waiter);
    }
  }
  for (Request& r : requests) {
    if (!r.valid()) return Status(Code::InvalidUsage, "ofi: wait on an empty request");
    if (!r.state()->status.isOk()) return r.state()->status;
  }
  return Status::ok();
}

MemoryRegion* Transport::registerMemory(const void* ptr, size_t bytes, int rail, Status* error) {
  if (rail < 0 || rail >= rails() || ptr == nullptr || bytes == 0) {
    if (error) *error = Status(Code::InvalidArgument, "ofi: registerMemory needs a buffer, bytes > 0 and a valid rail");
    return nullptr;
  }
  std::lock_guard lock(mutex_);
  return rails_[size_t(rail)]->mrCache().acquire(ptr, bytes, error);
}

void Transport::release(MemoryRegion* region, int rail) {
  std::lock_guard lock(mutex_);
  if (rail >= 0 && rail < rails()) rails_[size_t(rail)]->mrCache().release(region);
}

MrCacheStats Transport::mrCacheStats(int rail) const {
  if (rail < 0 || rail >= rails()) return {};
  std::lock_guard lock(mutex_);
  return rails_[size_t(rail)]->mrCache().stats();
}

void Transport::invalidate(const void* ptr, size_t bytes) {
  if (ptr == nullptr || bytes == 0) return;
  std::lock_guard lock(mutex_);
  for (auto& rail : rails_) rail->mrCache().invalidate(ptr, bytes);
}

uint32_t Transport::takeFreeSpaces() {
  std::lock_guard lock(mutex_);
  const uint32_t taken = freeSpaces_;
  freeSpaces_ = 0;
  return taken;
}

void Transport::keepUntilClosed(std::shared_ptr<void> what) {
  std::lock_guard lock(mutex_);
  kept_.push_back(std::move(what));
}

void Transport::keepFailedUntilClosed(std::shared_ptr<void> what) {
  std::lock_guard lock(mutex_);
  kept_.push_back(std::move(what));
  // A call failed on these rails: what is still posted there may be bound to a dead or broken connection.
  for (auto& rail : rails_) rail->parkIfPosted();
  failedCall_ = true;
}

void Transport::beforeClose(std::function<void(bool healthy)> farewell) {
  std::lock_guard lock(mutex_);
  farewell_ = std::move(farewell);
}

void Transport::releaseSpaces(uint32_t mask) {
  std::lock_guard lock(mutex_);
  freeSpaces_ |= mask & ~uint32_t{1} & ((uint32_t{1} << kMaxTagSpaces) - 1);
}

}  // namespace conflux::ofi
