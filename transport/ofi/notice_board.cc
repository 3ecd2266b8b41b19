#include "transport/ofi/notice_board.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "transport/ofi/tags.h"
#include "transport/transport.h"

namespace conflux::ofi {

NoticeBoard::NoticeBoard(Transport& transport, const std::vector<int>& remote)
    : transport_(transport), other_(size_t(transport.nranks()), false) {
  for (int r : remote) {
    if (r < 0 || r >= transport.nranks() || other_[size_t(r)]) continue;
    other_[size_t(r)] = true;
    peers_.push_back(r);
  }
  in_.resize(peers_.size());
  received_.resize(peers_.size());
  saidGoodbye_.resize(peers_.size(), false);
  peerWaits_.resize(peers_.size(), false);
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < peers_.size(); ++i) post(i);
}

uint64_t NoticeBoard::wireTag() { return spaceTag(0, transport::kFailureNoticeTag); }

void NoticeBoard::post(size_t i) {
  received_[i] = transport_.irecv(peers_[i], wireTag(), in_[i].data(), kNoticeBytes);
}

NoticeBoard::NoticeText NoticeBoard::compose(uint64_t id, const std::string& text) {
  NoticeText t{};
  std::memcpy(t.data(), &id, sizeof id);
  std::memcpy(t.data() + sizeof id, text.data(), std::min(text.size(), kNoticeBytes - sizeof id - 1));
  return t;
}

NoticeBoard::NoticeText NoticeBoard::composeProgress(uint64_t id, uint64_t seq, int64_t ageNs, uint32_t hops) {
  NoticeText t{};
  std::memcpy(t.data(), &id, sizeof id);
  t[sizeof id] = kProgressMark;
  std::memcpy(t.data() + 16, &seq, sizeof seq);
  std::memcpy(t.data() + 24, &ageNs, sizeof ageNs);
  std::memcpy(t.data() + 32, &hops, sizeof hops);
  return t;
}

void NoticeBoard::readArrived() {
  for (size_t i = 0; i < peers_.size(); ++i) {
    const Request& r = received_[i];
    if (saidGoodbye_[i]) continue;
    // A receive that failed (the peer's connection broke) is no notice, and no more come from that peer:
    // the communicators' own requests say so.
    if (!r.done() || r.failed()) continue;
    uint64_t from = 0;
    std::memcpy(&from, in_[i].data(), sizeof from);
    const char* text = in_[i].data() + sizeof from;
    if (*text == kGoodbyeMark) {
      // The peer is closing: nothing more comes from it, so its receive is not posted again.
      saidGoodbye_[i] = true;
      peerWaits_[i] = text[1] != 0;
      continue;
    }
    if (*text == kProgressMark) {
      uint64_t seq = 0;
      int64_t ageNs = 0;
      uint32_t hops = 0;
      std::memcpy(&seq, in_[i].data() + 16, sizeof seq);
      std::memcpy(&ageNs, in_[i].data() + 24, sizeof ageNs);
      std::memcpy(&hops, in_[i].data() + 32, sizeof hops);
      progress_[{from, peers_[i]}].keep(seq, ageNs, hops, transport::ToldProgress::nowNs());
    } else {
      arrived_.emplace(from, std::string(text, strnlen(text, kNoticeBytes - sizeof from)));  // keeps the first
    }
    post(i);
  }
}

std::optional<std::string> NoticeBoard::heard(uint64_t id) {
  std::lock_guard lock(mutex_);
  readArrived();
  const auto it = arrived_.find(id);
  if (it == arrived_.end()) return std::nullopt;
  return it->second;
}

transport::MessageTransport::HeardProgress NoticeBoard::heardProgress(uint64_t id, int from, uint64_t seq) {
  // No reading here: the caller asks once per peer it waits for, and heard() (CommNet::failure, once per
  // health check) has just read what arrived.
  std::lock_guard lock(mutex_);
  const auto it = progress_.find({id, from});
  return it != progress_.end() ? it->second.forCall(seq) : transport::MessageTransport::HeardProgress{};
}

std::vector<int> NoticeBoard::farewell(bool waitForPeers, Deadline until) {
  std::unique_lock lock(mutex_);
  goodbye_ = NoticeText{};
  goodbye_[sizeof(uint64_t)] = kGoodbyeMark;
  goodbye_[sizeof(uint64_t) + 1] = waitForPeers ? 1 : 0;
  goodbyes_.clear();
  for (int peer : peers_) goodbyes_.push_back(transport_.isend(peer, wireTag(), goodbye_.data(), kNoticeBytes));
  // Ranks still to hear from: a receive that failed is a broken connection, from which no goodbye comes.
  auto silent = [&] {
    std::vector<int> out;
    for (size_t i = 0; i < peers_.size(); ++i) {
      if (!saidGoodbye_[i] && !received_[i].failed()) out.push_back(peers_[i]);
    }
    return out;
  };
  auto over = [&] {
    for (size_t i = 0; i < peers_.size(); ++i) {
      const bool peerMayBeGone = received_[i].failed() || (saidGoodbye_[i] && !peerWaits_[i]);
      if (!goodbyes_[i].done() && !peerMayBeGone) return false;  // still leaving, for a peer that waits for it
    }
    return !waitForPeers || silent().empty();
  };
  // Nothing else drives the Transport any more (its last communicator is gone), so the lock is only
  // released around the blocking poll for form's sake.
  for (;;) {
    transport_.progress();
    readArrived();
    if (over() || Clock::now() >= until) break;
    lock.unlock();
    transport_.poll(until);
    lock.lock();
  }
  return waitForPeers ? silent() : std::vector<int>{};
}

void NoticeBoard::forget(uint64_t id) {
  std::lock_guard lock(mutex_);
  for (auto it = progress_.lower_bound({id, INT_MIN}); it != progress_.end() && it->first.first == id;) it = progress_.erase(it);
}

}  // namespace conflux::ofi
