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
    : transport_(parent.transport_), rank_(rank), space_(space) {
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
    transport_->keepUntilClosed(notices_);
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
  if (space_ != 0 || notices_ != nullptr || peers.empty()) return;
  auto n = std::make_shared<Notices>();
  n->peers = peers;
  n->in.resize(peers.size());
  n->out.resize(peers.size());
  for (size_t i = 0; i < peers.size(); ++i) {
    n->received.push_back(irecv(peers[i], transport::kFailureNoticeTag, n->in[i].data(), kNoticeBytes));
  }
  notices_ = std::move(n);
}

void CommNet::announceFailure(const Status& status) {
  if (notices_ == nullptr || announced_) return;
  announced_ = true;
  Notices& n = *notices_;
  const std::string text = status.message().substr(0, kNoticeBytes - 1);
  for (size_t i = 0; i < n.peers.size(); ++i) {
    n.out[i].fill('\0');
    std::memcpy(n.out[i].data(), text.data(), text.size());
    n.sent.push_back(isend(n.peers[i], transport::kFailureNoticeTag, n.out[i].data(), kNoticeBytes));
  }
  // Progress is manual: a notice moves only while this rank calls into the transport, and a rank that
  // failed may next spend seconds elsewhere (a shrink's rendezvous, the caller's own clean-up) while the
  // other nodes time out naming the wrong rank (found by the fault matrix: hier/kill). So the notices get a
  // short wait here, which live peers meet in well under a millisecond; only a notice to a stopped peer
  // uses it all, and the destructor gives what is left up to 200 ms more.
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
    noticed_ = Status(Code::RemoteError, "ofi: " + std::string(t.data(), strnlen(t.data(), kNoticeBytes)));
    break;
  }
  return noticed_;
}

}  // namespace conflux::ofi
