// conflux::ofi::NoticeBoard: the failure notices of every communicator that shares one Transport.
//
// A communicator whose call fails tells the ranks of its own on other nodes (CommNet::announceFailure),
// so that they fail at once naming the rank at fault instead of waiting out their timeout. A receive for
// such a notice stays posted for as long as the endpoints live, and each one holds one of the receives a
// rank may have posted to that peer at once (CONFLUX_OFI_INFLIGHT, plus the one extra receive the rails
// allow for the board's): one per communicator would use them all up once a few split children share the
// endpoints, and large messages would stop moving. So there is
// one board per Transport, made by the communicator that opened it: one receive per rank on another node,
// in tag space 0, posted again after each notice. A notice starts with the 8-byte id of the communicator
// it is for (0: the opener; a split child's members agree on a random one), and the board keeps what
// arrived by that id for the communicator to find. The same receives carry progress notices
// (Network::tellProgress): after the id a byte kProgressMark (no failure text starts with it), then the call
// number, the age of the sender's last progress and its hop count; the board keeps the latest per
// communicator and sender.
//
// The board also carries the closing handshake (farewell): a rank whose endpoints close tells every rank it
// listens to goodbye (after the id, the byte kGoodbyeMark) and, while its calls were healthy, keeps them open
// until each of those ranks said goodbye too, which a rank says only once its last call is over. Without it a
// rank that finished first closed its endpoints while a peer still had its last message to read, and
// libfabric's `net` and `sockets` providers could lose that message (the close of a socket with unread
// bytes resets the connection).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/ofi/transport.h"

namespace conflux::ofi {

class NoticeBoard {
 public:
  static constexpr size_t kNoticeBytes = 1024;  ///< every notice is this long (receives match sizes exactly)
  using NoticeText = std::array<char, kNoticeBytes>;
  static constexpr char kProgressMark = '\x01';  ///< the byte after the id that makes a progress notice
  static constexpr char kGoodbyeMark = '\x02';   ///< the byte after the id that makes a goodbye (the next: 1 if
                                                  ///< its sender waits for the goodbyes of others, else 0)

  /// Posts a receive for a notice from each of the Transport's ranks `remote` (those on other nodes; ranks
  /// out of range are left out). The board must outlive the Transport's endpoints (the opener hands it to
  /// keepUntilClosed).
  NoticeBoard(Transport& transport, const std::vector<int>& remote);
  NoticeBoard(const NoticeBoard&) = delete;
  NoticeBoard& operator=(const NoticeBoard&) = delete;

  /// Whether the Transport's rank `rank` is on another node.
  bool onOtherNode(int rank) const { return rank >= 0 && size_t(rank) < other_.size() && other_[size_t(rank)]; }
  /// The text of the first notice for communicator `id` that arrived; empty while none did. Reads the
  /// receives that completed and posts each again (so a later notice from the same rank waits in the
  /// provider until some communicator asks); any thread that drives the Transport may call it.
  std::optional<std::string> heard(uint64_t id);
  /// What the Transport's rank `from` last told of its progress in communicator `id`'s call `seq` or an
  /// earlier one (arrival less age, steady clock ns, and hops; ns 0 when none told), as of the last heard().
  transport::MessageTransport::HeardProgress heardProgress(uint64_t id, int from, uint64_t seq);
  /// Drops what was kept for communicator `id` (its view goes).
  void forget(uint64_t id);
  /// The notice for communicator `id` with `text` (cut to fit), as sent.
  static NoticeText compose(uint64_t id, const std::string& text);
  /// The progress notice for communicator `id`: its call `seq`, last progressed `ageNs` ago, learnt
  /// through `hops` notices.
  static NoticeText composeProgress(uint64_t id, uint64_t seq, int64_t ageNs, uint32_t hops);
  /// The tag a notice travels with on the Transport (tag space 0).
  static uint64_t wireTag();

  /// The closing handshake, run as the Transport closes (Transport::beforeClose): sends a goodbye to every
  /// rank listened to (saying whether this rank waits, `waitForPeers`), then progresses until the goodbyes
  /// have left and, when `waitForPeers`, each of those ranks said goodbye too or its connection broke (its
  /// receive failed), or until `until` passes. A goodbye still leaving for a rank whose own goodbye said it
  /// does not wait is not waited for: that rank may have closed already, and rxm then never completes the
  /// send. Returns the ranks it waited for in vain (none unless `waitForPeers`).
  std::vector<int> farewell(bool waitForPeers, Deadline until);

 private:
  void post(size_t i);  ///< under mutex_
  void readArrived();   ///< under mutex_: takes in what the completed receives hold, and posts them again

  Transport& transport_;
  std::vector<bool> other_;  ///< by the Transport's rank
  std::mutex mutex_;
  std::vector<int> peers_;   ///< the Transport's ranks listened to
  std::vector<NoticeText> in_;
  std::vector<Request> received_;
  std::vector<bool> saidGoodbye_;  ///< by index into peers_: a goodbye arrived (its receive is not posted again)
  std::vector<bool> peerWaits_;    ///< by index into peers_: its goodbye said it waits for this rank's
  NoticeText goodbye_{};           ///< what farewell() sends, read by every send
  std::vector<Request> goodbyes_;
  std::unordered_map<uint64_t, std::string> arrived_;  ///< the first notice per communicator id
  std::map<std::pair<uint64_t, int>, transport::ToldProgress> progress_;  ///< by (communicator id, sender)
};

}  // namespace conflux::ofi
