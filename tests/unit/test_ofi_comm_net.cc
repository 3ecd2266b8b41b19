// conflux::ofi::CommNet: communicators sharing one Transport (what a cfxCommSplit child does with its
// parent's endpoints). Two views per rank, one of them with its ranks reversed, each driven by its own
// thread with the same tags at once: every message reaches its own view, threads asleep in a blocking
// wait are woken when the other thread reads their completion, and tag spaces are taken and given back.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

#include "test_ofi_util.h"
#include "transport/ofi/comm_net.h"
#include "transport/ofi/notice_board.h"

namespace {

using namespace ofitest;
using conflux::Code;
using conflux::ofi::CommNet;
using conflux::ofi::kMaxSpaceTag;
using conflux::ofi::makeUserTag;
using conflux::ofi::NoticeBoard;

/// The Transport of a runThreads rank, as the shared_ptr a CommNet holds (runThreads owns it).
std::shared_ptr<Transport> borrowed(Transport& t) { return std::shared_ptr<Transport>(&t, [](Transport*) {}); }

/// `rounds` round trips of 64-byte messages between the view's ranks 0 and 1, through blocking waits,
/// every message carrying (salt, round, sender); true when every message held what its peer sent.
bool pingPong(CommNet& net, uint32_t salt, int rounds) {
  const int peer = 1 - net.rank();
  bool ok = true;
  for (int i = 0; i < rounds; ++i) {
    std::vector<uint32_t> out(16, salt * 1000003u + uint32_t(i) * 2u + uint32_t(net.rank())), in(16, 0);
    const uint64_t tag = makeUserTag(1, uint32_t(i));
    const bool first = net.rank() == 0;
    for (int step = 0; step < 2; ++step) {
      Request r = (step == 0) == first ? net.isend(peer, tag, out.data(), 64) : net.irecv(peer, tag, in.data(), 64);
      const conflux::Status s = net.wait(r);
      if (!s) {
        ADD_FAILURE() << "salt " << salt << " round " << i << ": " << s.message();
        return false;
      }
    }
    const uint32_t want = salt * 1000003u + uint32_t(i) * 2u + uint32_t(peer);
    ok = ok && std::all_of(in.begin(), in.end(), [&](uint32_t v) { return v == want; });
  }
  return ok;
}

TEST(OfiCommNet, TwoViewsOnTwoThreadsWithTheSameTags) {
  constexpr int kRounds = 300;
  runThreads(2, [](Options& o) { o.spinUs = 0; }, [&](int rank, Transport& t, ThreadGroup& group) {
    auto whole = std::make_unique<CommNet>(borrowed(t));
    EXPECT_EQ(whole->space(), 0u);
    const uint32_t spaces = t.takeFreeSpaces();
    EXPECT_EQ(spaces, 0xfffeu) << "every space but the creator's is free";
    EXPECT_EQ(t.takeFreeSpaces(), 0u) << "taken spaces are not offered twice";
    // The child's rank 0 is the Transport's rank 1: its messages must go to the mapped ranks.
    auto child = std::make_unique<CommNet>(*whole, std::vector<int>{1, 0}, 1 - rank, 3);
    t.releaseSpaces(spaces & ~(1u << 3));
    EXPECT_EQ(child->rank(), 1 - rank);
    group.barrier();

    std::atomic<bool> childOk{false};
    const auto start = std::chrono::steady_clock::now();
    std::thread other([&] { childOk = pingPong(*child, 7, kRounds); });
    const bool wholeOk = pingPong(*whole, 7, kRounds);
    other.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(wholeOk) << "rank " << rank << ": a message of the whole Transport's view went astray";
    EXPECT_TRUE(childOk) << "rank " << rank << ": a message of the child's view went astray";
    // A round trip on loopback takes about 150 us here with both views busy; when a thread asleep in a
    // wait is not woken by the thread that read its completion it sleeps until its own socket stirs or
    // 50 ms pass: 10 ms per round trip, measured with the wake-up taken out.
    EXPECT_LT(secs / kRounds, 4e-3) << "rank " << rank << ": " << kRounds << " round trips per view took " << secs
                                    << " s: are sleeping waiters woken?";
    std::printf("rank %d: %d round trips on each of two views at once: %.1f us per round trip\n", rank, kRounds,
                secs * 1e6 / kRounds);
    group.barrier();
    child.reset();
    EXPECT_EQ(t.takeFreeSpaces(), 0xfffeu) << "the child's space comes back when it goes";
    t.releaseSpaces(0xffffu);
    EXPECT_EQ(t.takeFreeSpaces(), 0xfffeu) << "space 0 is never given out";
  });
}

// One board per Transport hears the notices of every communicator on it: it keeps each by the id it
// names (the first per id), posts its one receive per peer again after each, so that later notices and
// ordinary messages still arrive.
TEST(OfiNoticeBoard, NoticesAreKeptByTheCommunicatorTheyName) {
  runThreads(2, {}, [&](int rank, Transport& t, ThreadGroup& group) {
    if (rank == 0) {
      auto board = std::make_shared<NoticeBoard>(t, std::vector<int>{1});
      t.keepUntilClosed(board);
      EXPECT_TRUE(board->onOtherNode(1));
      EXPECT_FALSE(board->onOtherNode(0));
      EXPECT_FALSE(board->onOtherNode(2));
      EXPECT_FALSE(board->heard(0).has_value());
      group.barrier();  // rank 1 sends now
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while ((!board->heard(0) || !board->heard(7)) && std::chrono::steady_clock::now() < until) t.progress();
      EXPECT_EQ(board->heard(7).value_or("none"), "rank 1 reported: first for 7");
      EXPECT_EQ(board->heard(0).value_or("none"), "rank 1 reported: for the opener");
      EXPECT_FALSE(board->heard(5).has_value()) << "no notice named communicator 5";
      uint32_t v = 0;
      Request r = t.irecv(1, makeUserTag(2, 9), &v, sizeof v);
      EXPECT_TRUE(t.wait(r).isOk());
      EXPECT_EQ(v, 42u) << "an ordinary message after the notices";
      // The third notice (a second one for 7) was sent before that message: read it too, and the first
      // for 7 must still be the one reported.
      for (int i = 0; i < 100; ++i) {
        t.progress();
        board->heard(7);
      }
      EXPECT_EQ(board->heard(7).value_or("none"), "rank 1 reported: first for 7");
    } else {
      group.barrier();
      const std::vector<std::pair<uint64_t, std::string>> notices = {
          {7, "rank 1 reported: first for 7"}, {0, "rank 1 reported: for the opener"}, {7, "rank 1 reported: again"}};
      std::vector<NoticeBoard::NoticeText> out;
      out.reserve(notices.size());
      std::vector<Request> sent;
      for (const auto& [id, text] : notices) {
        out.push_back(NoticeBoard::compose(id, text));
        sent.push_back(t.isend(0, NoticeBoard::wireTag(), out.back().data(), NoticeBoard::kNoticeBytes));
      }
      uint32_t v = 42;
      sent.push_back(t.isend(0, makeUserTag(2, 9), &v, sizeof v));
      EXPECT_TRUE(t.wait(sent).isOk());
    }
    group.barrier();
  });
}

// Progress notices (CommNet::tellProgress) travel through the same board: the receiver keeps the latest
// per communicator and sender as its arrival less the age told, with its hop count, answers only for that
// call or a later one, and a failure notice among them is still heard as the failure. (The board reads
// what arrived when failure() asks, once per health check; heardProgress only looks up.)
TEST(OfiNoticeBoard, ProgressNoticesArriveBesideFailures) {
  using Clock = std::chrono::steady_clock;
  auto nowNs = [] { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); };
  std::atomic<bool> heardFirst{false}, finished{false}, failureSent{false};
  runThreads(2, {}, [&](int rank, Transport& t, ThreadGroup& group) {
    CommNet net(borrowed(t));
    net.listenForNotices({1 - rank});
    group.barrier();
    const auto until = Clock::now() + std::chrono::seconds(10);
    if (rank == 1) {
      net.tellProgress(0, 5, 2'000'000'000, 3);  // call 5, progressed 2 s ago, learnt through 3 notices
      while (!heardFirst.load() && Clock::now() < until) t.progress();  // progress is manual: it leaves meanwhile
      // Its completion may come a moment after rank 0 read it, and a notice is dropped while the one before
      // is under way: progress a little longer.
      for (const auto settle = Clock::now() + std::chrono::milliseconds(100); Clock::now() < settle;) t.progress();
      net.tellProgress(0, 5, 0, 0);              // progressed just now, itself
      const NoticeBoard::NoticeText text = NoticeBoard::compose(0, "rank 1 reported: broken");
      Request failure = t.isend(0, NoticeBoard::wireTag(), text.data(), NoticeBoard::kNoticeBytes);
      // As above, the send's completion may come a moment after rank 0 read it and finished (rank 0 keeps
      // progressing until then, in case the completion waits for it).
      while ((!finished.load() || !failure.done()) && Clock::now() < until) t.progress();
      EXPECT_TRUE(failure.done());
      failureSent.store(true);
    } else {
      while (net.heardProgress(1, 5).ns == 0 && Clock::now() < until) {
        t.progress();
        EXPECT_TRUE(net.failure().isOk());  // reads what arrived
      }
      const auto heard = net.heardProgress(1, 5);
      EXPECT_NE(heard.ns, 0) << "the progress notice did not arrive";
      EXPECT_EQ(heard.hops, 3u);
      EXPECT_NEAR(double(nowNs() - heard.ns) / 1e9, 2.0, 0.5) << "arrival less the age told";
      EXPECT_EQ(net.heardProgress(1, 9).ns, heard.ns) << "progress in an earlier call counts for a later one";
      EXPECT_EQ(net.heardProgress(1, 4).ns, 0) << "not for an earlier call";
      EXPECT_EQ(net.heardProgress(0, 5).ns, 0) << "nothing from this rank";
      heardFirst.store(true);
      while (net.failure().isOk() && Clock::now() < until) t.progress();
      EXPECT_NE(net.failure().message().find("rank 1 reported: broken"), std::string::npos) << net.failure().message();
      // The newer notice, sent before the failure, was read before it.
      EXPECT_LT(double(nowNs() - net.heardProgress(1, 5).ns) / 1e9, 1.0) << "a newer notice for the same call replaces the older";
      EXPECT_EQ(net.heardProgress(1, 5).hops, 0u);
      finished.store(true);
      while (!failureSent.load() && Clock::now() < until) t.progress();
    }
    group.barrier();
  });
}

TEST(OfiCommNet, BadPeersTagsAndSpacesAreRefused) {
  runThreads(2, {}, [&](int rank, Transport& t, ThreadGroup&) {
    CommNet whole(borrowed(t));
    CommNet child(whole, {rank}, 0, 2);  // a one-member view: this rank alone
    uint8_t b = 0;
    Request r = child.isend(1, 0, &b, 1);
    EXPECT_TRUE(r.failed()) << "peer 1 is not a rank of a one-member view";
    EXPECT_EQ(r.status().code(), Code::InvalidArgument);
    Request r2 = whole.irecv(1 - rank, kMaxSpaceTag + 1, &b, 1);
    EXPECT_TRUE(r2.failed()) << "a tag that reaches into the space bits";
    EXPECT_EQ(r2.status().code(), Code::InvalidArgument);
    EXPECT_THROW(CommNet(whole, {0, 1}, 0, 0), conflux::Error) << "space 0 is the creator's";
    EXPECT_THROW(CommNet(whole, {0, 1}, 0, 16), conflux::Error);
    EXPECT_THROW(CommNet(whole, {0, 2}, 0, 1), conflux::Error) << "member 2 is not a rank of the parent";
    EXPECT_THROW(CommNet(whole, {0, 1}, 2, 1), conflux::Error) << "rank 2 of two members";
  });
}

}  // namespace
