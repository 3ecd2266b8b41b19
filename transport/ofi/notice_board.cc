#include "transport/ofi/notice_board.h"

#include <algorithm>
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

std::optional<std::string> NoticeBoard::heard(uint64_t id) {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < peers_.size(); ++i) {
    const Request& r = received_[i];
    // A receive that failed (the peer's connection broke) is no notice, and no more come from that peer:
    // the communicators' own requests say so.
    if (!r.done() || r.failed()) continue;
    uint64_t from = 0;
    std::memcpy(&from, in_[i].data(), sizeof from);
    const char* text = in_[i].data() + sizeof from;
    arrived_.emplace(from, std::string(text, strnlen(text, kNoticeBytes - sizeof from)));  // keeps the first
    post(i);
  }
  const auto it = arrived_.find(id);
  if (it == arrived_.end()) return std::nullopt;
  return it->second;
}

}  // namespace conflux::ofi
