#include "transport/ofi/comm_net.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "core/config.h"
#include "core/log.h"

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
  if (outgoing_ != nullptr) {
    // Notices still on their way get up to 200 ms to leave, as the tcp transport gives them; the buffers
    // of those that did not stay until the endpoints close.
    sendNotices(Clock::now() + std::chrono::milliseconds(200));
    transport_->keepUntilClosed(outgoing_);
  }
  if (told_ != nullptr &&
      std::any_of(told_->begin(), told_->end(), [](const Told& t) { return t.sent.valid() && !t.sent.done(); })) {
    transport_->keepUntilClosed(told_);
  }
  if (board_ != nullptr) board_->forget(noticeId_);
  if (space_ != 0 && !retired_) transport_->releaseSpaces(uint32_t{1} << space_);
}

void CommNet::tellProgress(int peer, uint64_t seq, int64_t ageNs, uint32_t hops) {
  if (board_ == nullptr || announced_ || peer < 0 || peer >= nranks() || peer == rank_ ||
      !board_->onOtherNode(transportRank(peer))) {
    return;
  }
  if (told_ == nullptr) told_ = std::make_shared<std::vector<Told>>(size_t(nranks()));
  Told& t = (*told_)[size_t(peer)];
  if (t.sent.valid() && !t.sent.done()) return;
  t.text = NoticeBoard::composeProgress(noticeId_, seq, ageNs, hops);
  t.sent = transport_->isend(transportRank(peer), NoticeBoard::wireTag(), t.text.data(), NoticeBoard::kNoticeBytes);
}

CommNet::HeardProgress CommNet::heardProgress(int peer, uint64_t seq) {
  if (board_ == nullptr || peer < 0 || peer >= nranks()) return {};
  return board_->heardProgress(noticeId_, transportRank(peer), seq);
}

Request CommNet::isend(int peer, uint64_t tag, const void* buf, size_t bytes) {
  return transport_->isend(transportRank(peer), wireUserTag(tag), buf, bytes);
}

Request CommNet::irecv(int peer, uint64_t tag, void* buf, size_t bytes) {
  return transport_->irecv(transportRank(peer), wireUserTag(tag), buf, bytes);
}

void CommNet::listenForNotices(const std::vector<int>& peers) {
  if (space_ != 0 || board_ != nullptr) return;
  std::vector<int> remote;
  for (int p : peers) remote.push_back(transportRank(p));
  board_ = std::make_shared<NoticeBoard>(*transport_, remote);
  transport_->keepUntilClosed(board_);  // its receives stay posted until the endpoints close
  noticePeers_ = peers;
  // At most an hour: a deadline that far keeps clear of the clock's range.
  const auto closeWait = std::chrono::milliseconds(std::clamp<int64_t>(config::getInt(config::Var::OFI_CLOSE_WAIT_MS), 0, 3600000));
  if (closeWait.count() <= 0 || remote.empty()) return;
  // The closing handshake (notice_board.h). After a failed call the goodbyes only get the notices' 200 ms
  // to leave: the peers that are still healthy then stop waiting for this rank, and this rank does not wait
  // for ranks that may be dead.
  transport_->beforeClose([board = board_.get(), closeWait](bool healthy) {
    const auto start = Clock::now();
    const std::vector<int> silent =
        board->farewell(healthy, start + (healthy ? closeWait : std::chrono::milliseconds(200)));
    if (silent.empty()) return;
    std::string list;
    for (int r : silent) list += (list.empty() ? "" : ", ") + std::to_string(r);
    CFX_WARN(kNet, "ofi: closing the endpoints without a goodbye from rank(s) %s within CONFLUX_OFI_CLOSE_WAIT_MS=%lld ms: "
             "a message to them still on its way may be cut off (they have not closed theirs, or are gone)",
             list.c_str(), static_cast<long long>(closeWait.count()));
  });
}

void CommNet::shareNotices(const CommNet& parent, uint64_t id) {
  board_ = parent.board_;
  noticeId_ = id;
  if (board_ == nullptr) return;
  for (int r = 0; r < nranks(); ++r) {
    if (board_->onOtherNode(transportRank(r))) noticePeers_.push_back(r);
  }
}

void CommNet::announceFailure(const Status& status) {
  if (board_ == nullptr || noticePeers_.empty() || announced_) return;
  announced_ = true;
  auto out = std::make_shared<Outgoing>();
  out->text = NoticeBoard::compose(noticeId_, status.message());  // one buffer, read by every send
  for (int peer : noticePeers_) {
    out->sent.push_back(
        transport_->isend(transportRank(peer), NoticeBoard::wireTag(), out->text.data(), NoticeBoard::kNoticeBytes));
  }
  outgoing_ = std::move(out);
  // Progress is manual: a notice moves only while this rank calls into the transport, and a rank that
  // failed may next spend seconds elsewhere (a shrink's rendezvous, the caller's own clean-up) while the
  // other nodes time out naming the wrong rank (found by the fault matrix: hier/kill). So the notices get a
  // short wait here, which live peers meet in well under a millisecond; a notice to a stopped peer, or
  // over a link that is down, uses it all, and the destructor gives what is left up to 200 ms more.
  sendNotices(Clock::now() + kNoticeSendWait);
}

void CommNet::sendNotices(Deadline until) {
  auto allSent = [&] {
    return std::all_of(outgoing_->sent.begin(), outgoing_->sent.end(), [](const Request& r) { return r.done(); });
  };
  progress();
  while (!allSent() && Clock::now() < until) poll(until);
}

Status CommNet::failure() {
  if (!noticed_.isOk() || board_ == nullptr) return noticed_;
  if (std::optional<std::string> text = board_->heard(noticeId_)) {
    noticed_ = Status(Code::RemoteError, "ofi: " + *text);
  }
  return noticed_;
}

}  // namespace conflux::ofi
