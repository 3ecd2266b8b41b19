// conflux::ofi::CommNet: one communicator's share of a Transport, its ranks and its tag space.
//
// The communicator that opens a Transport holds tag space 0 and the identity rank map. A cfxCommSplit
// child that spans nodes gets a view of its parent's Transport instead of endpoints of its own: a rank map
// (child rank -> the Transport's rank) and a tag space that is free on every member (tags.h), so the split
// opens no endpoint and exchanges no address. Parent and child may then be driven from different threads
// (the Transport is thread-safe); each view has its own Waiter, which is why one view is driven by one
// thread at a time (a communicator runs one call at a time).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transport/ofi/notice_board.h"
#include "transport/ofi/tags.h"
#include "transport/ofi/transport.h"
#include "transport/network.h"
#include "transport/transport.h"

namespace conflux::ofi {

static_assert(kMaxSpaceTag == transport::MessageTransport::kMaxTag, "a communicator's tags fill its tag space");

class CommNet : public transport::Network {
 public:
  /// The whole of `transport`, in tag space 0.
  explicit CommNet(std::shared_ptr<Transport> transport);
  /// A view of `parent`'s Transport for a communicator whose rank r is `parent`'s rank `members[r]`, in
  /// `space`, which the caller took from this rank's Transport (takeFreeSpaces) and which the view gives
  /// back when it is destroyed. Throws Error(InvalidArgument) for a rank or space out of range.
  CommNet(const CommNet& parent, const std::vector<int>& members, int rank, uint32_t space);
  ~CommNet() override;
  CommNet(const CommNet&) = delete;
  CommNet& operator=(const CommNet&) = delete;

  int rank() const override { return rank_; }
  int nranks() const override { return int(ranks_.size()); }
  /// This communicator's tag space (0 for the Transport's creator).
  uint32_t space() const { return space_; }
  Transport& transport() const { return *transport_; }
  const Capabilities& capabilities() const { return transport_->capabilities(); }

  /// Transport::isend / irecv to the communicator's rank `peer`, with `tag` <= kMaxSpaceTag (= kMaxTag).
  Request isend(int peer, uint64_t tag, const void* buf, size_t bytes) override;
  Request irecv(int peer, uint64_t tag, void* buf, size_t bytes) override;
  void progress() override { transport_->progress(); }
  /// Transport::poll with this view's Waiter.
  void poll(Deadline until) override { transport_->poll(until, &waiter_); }
  void forget(const void* ptr, size_t bytes) override { transport_->invalidate(ptr, bytes); }

  // ---- transport::Network ----
  std::string_view name() const override { return "ofi"; }
  std::string describe() const override { return description_; }
  std::string endpointKey() const override { return endpointKey_; }
  /// The Transport's rails, from the view that created it (space 0) only.
  std::vector<transport::RailTraffic> railTraffic() const override {
    return space_ == 0 ? transport_->railTraffic() : std::vector<transport::RailTraffic>{};
  }
  /// Keeps `buffers` until the endpoints close and retires this view's tag space (retireSpace).
  void retire(std::shared_ptr<void> buffers) override;
  /// The split protocol: each member takes every tag space of its Transport that no communicator holds
  /// (so that a split running at the same time on another thread cannot offer the same ones), the
  /// members all-gather what they took, and the child gets the lowest space free on all; each gives the
  /// rest back. Null when no space is free on every member.
  std::shared_ptr<transport::Network> shareWith(const std::vector<int>& members, int rank,
                                                const transport::BlobAllGather& allGather) override;
  /// Failure notices (notice_board.h), for the view that opened the Transport: makes the Transport's
  /// NoticeBoard, listening to `peers` (every rank on another node). Call once, before any call.
  void listenForNotices(const std::vector<int>& peers);
  /// Sends `status`'s text to this view's ranks on other nodes (once), progressing until the sends have
  /// left or kNoticeSendWait (50 ms) passed; the destructor gives those still under way up to 200 ms more.
  void announceFailure(const Status& status) override;
  /// The first notice for this view that arrived ("ofi: <its text>"); ok while none did.
  Status failure() override;
  /// A progress notice to `peer` on another node, through the notice board's receives; dropped while the
  /// last one to it is still under way, or where there is no board.
  void tellProgress(int peer, uint64_t seq, int64_t ageNs, uint32_t hops) override;
  HeardProgress heardProgress(int peer, uint64_t seq) override;
  /// What describe() and endpointKey() say (set by the opener).
  void setIdentity(std::string description, std::string endpointKey) {
    description_ = std::move(description);
    endpointKey_ = std::move(endpointKey);
  }
  /// Transport::wait with this view's Waiter, by `deadline` (default: the Transport's timeout).
  Status wait(std::span<Request> requests, Deadline deadline) { return transport_->wait(requests, deadline, &waiter_); }
  Status wait(std::span<Request> requests) { return wait(requests, transport_->defaultDeadline()); }
  Status wait(Request& request) { return wait(std::span<Request>(&request, 1)); }

  /// Keeps this view's tag space taken after the view goes: a failed call may have left receives posted
  /// in it, which would take the messages of a later communicator given the same space.
  void retireSpace() { retired_ = true; }

 private:
  /// The Transport's rank of `peer` (-1 when out of range) and tag (kMaxUserTag + 1 when too large):
  /// the Transport fails the request, naming the peer and the tag.
  int transportRank(int peer) const { return peer >= 0 && peer < nranks() ? ranks_[size_t(peer)] : -1; }
  uint64_t wireUserTag(uint64_t tag) const { return tag <= kMaxSpaceTag ? spaceTag(space_, tag) : kMaxUserTag + 1; }

  std::shared_ptr<Transport> transport_;
  std::vector<int> ranks_;  ///< communicator rank -> the Transport's rank
  int rank_ = 0;
  uint32_t space_ = 0;
  bool retired_ = false;
  Waiter waiter_;
  std::string description_;
  std::string endpointKey_;

  static constexpr auto kNoticeSendWait = std::chrono::milliseconds(50);  // see announceFailure
  /// A shared view's notices: the parent's board, and `id`, which every member of the view was given.
  void shareNotices(const CommNet& parent, uint64_t id);
  /// Progresses until every notice sent has left or @p until passes.
  void sendNotices(Deadline until);

  struct Outgoing {
    NoticeBoard::NoticeText text;
    std::vector<Request> sent;
  };
  std::shared_ptr<NoticeBoard> board_;  ///< the Transport's, made by the view that opened it
  std::vector<int> noticePeers_;        ///< this view's ranks on other nodes
  uint64_t noticeId_ = 0;               ///< this view's id in notices (0: the opener's)
  std::shared_ptr<Outgoing> outgoing_;  ///< the notices this view sent (kept until the endpoints close)
  struct Told {
    NoticeBoard::NoticeText text;
    Request sent;
  };
  /// The progress notices under way, by peer (kept until the endpoints close if one still is).
  std::shared_ptr<std::vector<Told>> told_;
  bool announced_ = false;
  Status noticed_;
};

/// Opens a Transport for the communicator `args` describes and returns its view in tag space 0
/// (transport/registry.cc registers it as "ofi"). Binds to CONFLUX_SOCKET_IFNAME's address when no
/// CONFLUX_OFI_ADDR is set, and uses the NICs nearest each rank when the topology knows them.
std::shared_ptr<transport::Network> openNetwork(const transport::NetOpenArgs& args);

}  // namespace conflux::ofi
