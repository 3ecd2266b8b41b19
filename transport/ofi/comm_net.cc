#include "transport/ofi/comm_net.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

namespace conflux::ofi {

CommNet::CommNet(std::shared_ptr<Transport> transport) : transport_(std::move(transport)) {
  rank_ = transport_->rank();
  ranks_.resize(size_t(transport_->nranks()));
  for (size_t r = 0; r < ranks_.size(); ++r) ranks_[r] = int(r);
}

CommNet::CommNet(const CommNet& parent, const std::vector<int>& members, int rank, uint32_t space)
    : transport_(parent.transport_), rank_(rank), space_(space), onOtherNode_(parent.onOtherNode_) {
  if (space == 0 || space >= uint32_t(kMaxTagSpaces)) {
    throw Error(Code::InvalidArgument, "ofi: tag space " + std::to_string(space) + " is not one a child can hold");
  }
  if (rank < 0 || rank >= int(members.size())) {
    throw Error(Code::InvalidArgument, "ofi: rank " + std::to_string(rank) + " of " +
                                           std::to_string(members.size()) + " members is out of range");
  }
  for (int m : members) {
    if (m < 0 || m >= parent.nranks()) {
      throw Error(Code::InvalidArgument, "ofi: member " + std::to_string(m) + " is not a rank of the parent (" +
                                             std::to_string(parent.nranks()) + " ranks)");
    }
    ranks_.push_back(parent.ranks_[size_t(m)]);
  }
}

CommNet::~CommNet() {
  if (notices_ != nullptr) {
    // Notices still on their way get up to 200 ms to leave, as the tcp transport gives them.
    sendNotices(Clock::now() + std::chrono::milliseconds(200));
    if (space_ == 0 || !withdrawNotices()) {
      transport_->keepUntilClosed(notices_);
      if (space_ != 0) retired_ = true;  // a receive still posted there would take a later view's notice
    }
  }
  if (space_ != 0 && !retired_) transport_->releaseSpaces(uint32_t{1} << space_);
}

Request CommNet::isend(int peer, uint64_t tag, const void* buf, size_t bytes) {
  return transport_->isend(transportRank(peer), wireUserTag(tag), buf, bytes);
}

Request CommNet::irecv(int peer, uint64_t tag, void* buf, size_t bytes) {
  return transport_->irecv(transportRank(peer), wireUserTag(tag), buf, bytes);
}

void CommNet::listenForNotices(const std::vector<int>& peers) {
  if (space_ == 0 && onOtherNode_ == nullptr) {
    auto other = std::make_shared<std::vector<bool>>(size_t(transport_->nranks()), false);
    for (int p : peers) (*other)[size_t(ranks_[size_t(p)])] = true;
    onOtherNode_ = std::move(other);
  }
  if (notices_ != nullptr || peers.empty()) return;
  auto n = std::make_shared<Notices>();
  n->peers = peers;
  n->in.resize(peers.size());
  n->out.resize(peers.size());
  n->received.resize(peers.size());
  notices_ = std::move(n);
  for (size_t i = 0; i < peers.size(); ++i) postNoticeReceive(i);
}

void CommNet::postNoticeReceive(size_t i) {
  Notices& n = *notices_;
  n.received[i] = irecv(n.peers[i], transport::kFailureNoticeTag, n.in[i].data(), kNoticeBytes);
}

bool CommNet::withdrawNotices() {
  // Up to 200 ms, like a rail's close: an unmatched receive is cancelled at once.
  if (!transport_->cancel(notices_->received, Clock::now() + std::chrono::milliseconds(200))) return false;
  return std::all_of(notices_->sent.begin(), notices_->sent.end(), [](const Request& r) { return r.done(); });
}

void CommNet::announceFailure(const Status& status) {
  if (notices_ == nullptr || announced_) return;
  announced_ = true;
  Notices& n = *notices_;
  const std::string text = status.message().substr(0, kNoticeBytes - sizeof noticeId_ - 1);
  for (size_t i = 0; i < n.peers.size(); ++i) {
    n.out[i].fill('\0');
    std::memcpy(n.out[i].data(), &noticeId_, sizeof noticeId_);
    std::memcpy(n.out[i].data() + sizeof noticeId_, text.data(), text.size());
    n.sent.push_back(isend(n.peers[i], transport::kFailureNoticeTag, n.out[i].data(), kNoticeBytes));
  }
  // Progress is manual: a notice moves only while this rank calls into the transport, and a rank that
  // failed may next spend seconds elsewhere (a shrink's rendezvous, the caller's own clean-up) while the
  // other nodes time out naming the wrong rank (found by the fault matrix: hier/kill). So the notices get a
  // short wait here, which live peers meet in well under a millisecond; a notice to a stopped peer, or
  // over a link that is down, uses it all, and the destructor gives what is left up to 200 ms more.
  sendNotices(Clock::now() + kNoticeSendWait);
}

void CommNet::sendNotices(Deadline until) {
  auto allSent = [&] {
    return std::all_of(notices_->sent.begin(), notices_->sent.end(), [](const Request& r) { return r.done(); });
  };
  progress();
  while (!allSent() && Clock::now() < until) poll(until);
}

Status CommNet::failure() {
  if (!noticed_.isOk() || notices_ == nullptr) return noticed_;
  for (size_t i = 0; i < notices_->peers.size(); ++i) {
    const Request& r = notices_->received[i];
    // A receive that failed (the peer's connection broke) is no notice: the caller's own requests say so.
    if (!r.done() || r.failed()) continue;
    const NoticeText& t = notices_->in[i];
    uint64_t id = 0;
    std::memcpy(&id, t.data(), sizeof id);
    if (id != noticeId_) {  // for a view that had this tag space before: not this one's business
      postNoticeReceive(i);
      continue;
    }
    const char* text = t.data() + sizeof id;
    noticed_ = Status(Code::RemoteError, "ofi: " + std::string(text, strnlen(text, kNoticeBytes - sizeof id)));
    break;
  }
  return noticed_;
}

}  // namespace conflux::ofi
