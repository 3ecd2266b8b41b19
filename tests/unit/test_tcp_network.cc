// The tcp network transport (transport/tcp/tcp_network.h) in one process: threads are ranks, each a node
// of its own, on 127.0.0.1.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <latch>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/moved_bytes_watch.h"
#include "tests/unit/thread_group.h"
#include "transport/tcp/tcp_network.h"
#include "transport/tcp/tcp_wire.h"

namespace conflux {
namespace {

using transport::Clock;
using transport::Network;
using transport::Request;

using testing::ThreadGroup;

/// Runs `body(rank, net)` on `n` threads, each rank a node of its own.
void runRanks(int n, const std::function<void(int, Network&)>& body) {
  setenv("CONFLUX_TCP_ADDR", "127.0.0.1", 1);
  ThreadGroup group(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      transport::NetOpenArgs args;
      args.rank = r;
      args.nranks = n;
      args.localRanks = {r};
      args.allGather = [&, r](const std::vector<uint8_t>& v) { return group.allGather(r, v); };
      args.localAllGather = [](const std::vector<uint8_t>& v) { return v; };
      args.timeoutMs = 10000;
      std::shared_ptr<Network> net = tcp::openNetwork(args);
      body(r, *net);
    });
  }
  for (auto& t : threads) t.join();
}

Status wait(Network& net, std::vector<Request> reqs, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  return transport::waitAll(net, reqs, Clock::now() + limit, "test");
}

TEST(TcpNetwork, MessagesOfEverySizeMatchByTagInPostingOrder) {
  runRanks(3, [](int rank, Network& net) {
    EXPECT_EQ(net.rank(), rank);
    EXPECT_NE(net.describe().find("tcp sockets to 2 rank(s)"), std::string::npos) << net.describe();
    const int next = (rank + 1) % 3, prev = (rank + 2) % 3;
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{4097}, size_t{8} << 20}) {
      std::vector<uint8_t> out(bytes), in(bytes), in2(bytes);
      std::iota(out.begin(), out.end(), static_cast<uint8_t>(rank));
      // Two messages with one tag and one with another: the first receive posted takes the first sent.
      std::vector<uint8_t> out2(bytes, 0xab);
      std::vector<Request> reqs = {net.isend(next, 7, out.data(), bytes), net.isend(next, 9, out2.data(), bytes),
                                   net.isend(next, 7, out2.data(), bytes)};
      std::vector<uint8_t> tag9(bytes);
      reqs.push_back(net.irecv(prev, 7, in.data(), bytes));
      reqs.push_back(net.irecv(prev, 7, in2.data(), bytes));
      reqs.push_back(net.irecv(prev, 9, tag9.data(), bytes));
      ASSERT_TRUE(wait(net, reqs).isOk());
      std::vector<uint8_t> want(bytes);
      std::iota(want.begin(), want.end(), static_cast<uint8_t>(prev));
      EXPECT_EQ(in, want) << bytes;
      EXPECT_EQ(in2, std::vector<uint8_t>(bytes, 0xab)) << bytes;
      EXPECT_EQ(tag9, std::vector<uint8_t>(bytes, 0xab)) << bytes;
    }
  });
}

TEST(TcpNetwork, AMessageThatArrivesBeforeItsReceiveIsKept) {
  runRanks(2, [](int rank, Network& net) {
    std::vector<uint32_t> buf(300000, 0);
    if (rank == 0) {
      std::iota(buf.begin(), buf.end(), 0u);
      ASSERT_TRUE(wait(net, {net.isend(1, 3, buf.data(), buf.size() * 4)}).isOk());
      uint8_t go = 0;
      ASSERT_TRUE(wait(net, {net.irecv(1, 4, &go, 1)}).isOk());
    } else {
      // Let the whole message arrive (and more progress) before the receive is posted.
      const auto until = Clock::now() + std::chrono::milliseconds(200);
      while (Clock::now() < until) net.poll(until);
      ASSERT_TRUE(wait(net, {net.irecv(0, 3, buf.data(), buf.size() * 4)}).isOk());
      EXPECT_EQ(buf[123456], 123456u);
      uint8_t go = 1;
      ASSERT_TRUE(wait(net, {net.isend(0, 4, &go, 1)}).isOk());
    }
  });
}

// A large message's requests show its bytes moving before it completes, on both sides (the executor
// counts that as progress: a slow link is not a stuck peer), and all of them once it has.
TEST(TcpNetwork, ALargeMessageShowsItsBytesMovingBeforeItCompletes) {
  runRanks(2, [](int rank, Network& net) {
    constexpr size_t kBytes = size_t{32} << 20;
    std::vector<uint8_t> buf(kBytes, uint8_t(rank == 0 ? 0x5a : 0));
    // Paced so that neither side can move the whole message in one step: with both polling flat out, one
    // poll of the sender wrote all 32 MiB while the receiver drained the socket (seen once under ASan on
    // a loaded machine). The receiver starts late (the sender fills the socket buffers and waits), the
    // sender pauses between polls (the receiver empties them and waits).
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Request r = rank == 0 ? net.isend(1, 5, buf.data(), kBytes) : net.irecv(0, 5, buf.data(), kBytes);
    const bool sawPart = testing::sawBytesMoving(r, kBytes, [&] {
      net.poll(Clock::now() + std::chrono::milliseconds(1));
      if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    });
    ASSERT_TRUE(r.done());
    ASSERT_TRUE(r.status().isOk()) << r.status().message();
    EXPECT_TRUE(sawPart) << "rank " << rank << " saw the message only whole";
    EXPECT_EQ(r.movedBytes(), kBytes);
    if (rank == 1) {
      EXPECT_EQ(buf[kBytes - 1], 0x5a);
    }
  });
}

TEST(TcpNetwork, BadArgumentsAndASizeMismatchFailTheirRequestOnly) {
  runRanks(2, [](int rank, Network& net) {
    uint64_t x = 0;
    EXPECT_EQ(net.isend(rank, 1, &x, 8).status().code(), Code::InvalidArgument);  // not on another node
    EXPECT_EQ(net.isend(5, 1, &x, 8).status().code(), Code::InvalidArgument);
    EXPECT_EQ(net.irecv(1 - rank, Network::kMaxTag + 1, &x, 8).status().code(), Code::InvalidArgument);
    if (rank == 0) {
      ASSERT_TRUE(wait(net, {net.isend(1, 2, &x, 8)}).isOk());
      ASSERT_TRUE(wait(net, {net.isend(1, 3, &x, 8)}).isOk());
    } else {
      uint32_t small = 0;
      Request bad = net.irecv(0, 2, &small, 4);
      EXPECT_FALSE(wait(net, {bad}).isOk());
      EXPECT_NE(bad.status().message().find("sent 8 bytes with tag 2, but the receive expects 4"), std::string::npos)
          << bad.status().message();
      ASSERT_TRUE(wait(net, {net.irecv(0, 3, &x, 8)}).isOk());  // the connection still works
    }
  });
}

TEST(TcpNetwork, AFailureNoticeFailsEveryOperationWithItsText) {
  std::latch bothSawIt(2);  // neither of ranks 1 and 2 closes before the other has seen the notice
  runRanks(3, [&](int rank, Network& net) {
    uint64_t x = 0;
    if (rank == 0) {
      net.announceFailure(Status(Code::Timeout, "rank 0 reported: rank 7 is stuck"));
      uint8_t done = 0;
      Request r = net.irecv(1, 5, &done, 1);  // ends when rank 1 closes
      EXPECT_FALSE(wait(net, {r}).isOk());
    } else {
      // Ranks 1 and 2 wait for each other, not for rank 0: the notice fails those waits too.
      Request r = net.irecv(3 - rank, 1, &x, 8);
      EXPECT_FALSE(wait(net, {r}).isOk());
      EXPECT_EQ(r.status().code(), Code::RemoteError);
      EXPECT_NE(r.status().message().find("rank 0 reported: rank 7 is stuck"), std::string::npos) << r.status().message();
      // Later operations fail at once.
      EXPECT_TRUE(net.isend(0, 5, &x, 1).failed());
      bothSawIt.arrive_and_wait();
    }
  });
}

// A progress notice (tellProgress) is heard as the sender's progress (its arrival less the age told), for
// its call and later ones, and is no activity on the link (linkActivity counts messages' bytes only: else
// ranks that wait for each other would keep each other's timers running with notices alone). Messages on
// the same connection still match.
TEST(TcpNetwork, AProgressNoticeIsHeardButIsNoActivityOnTheLink) {
  auto nowNs = [] { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); };
  std::atomic<bool> heard{false};
  runRanks(2, [&](int rank, Network& net) {
    const auto until = Clock::now() + std::chrono::seconds(10);
    if (rank == 1) {
      const uint64_t before = net.linkActivity(0);
      net.tellProgress(0, 5, 2'000'000'000, 2);  // call 5, progressed 2 s ago, learnt through 2 notices
      uint64_t x = 77;
      EXPECT_TRUE(wait(net, {net.isend(0, 3, &x, 8)}).isOk());
      while (!heard.load() && Clock::now() < until) {  // the notice leaves while this rank progresses
        net.progress();
        EXPECT_LE(net.linkActivity(0), before + sizeof(tcp::wire::Header) + 8) << "the notice counted as activity";
      }
    } else {
      uint64_t x = 0;
      EXPECT_TRUE(wait(net, {net.irecv(1, 3, &x, 8)}).isOk());
      EXPECT_EQ(x, 77u) << "a message after the notice";
      while (net.heardProgress(1, 5).ns == 0 && Clock::now() < until) net.progress();
      const auto told = net.heardProgress(1, 5);
      EXPECT_NE(told.ns, 0);
      EXPECT_EQ(told.hops, 2u);
      EXPECT_NEAR(double(nowNs() - told.ns) / 1e9, 2.0, 0.5) << "arrival less the age told";
      EXPECT_EQ(net.heardProgress(1, 6).ns, told.ns) << "progress in an earlier call counts for a later one";
      EXPECT_EQ(net.heardProgress(1, 4).ns, 0) << "not for an earlier call";
      EXPECT_EQ(net.linkActivity(1), sizeof(tcp::wire::Header) + 8) << "only the message's bytes are activity";
      heard.store(true);
    }
  });
}

/// A raw socket to `e`, connected (blocking).
int connectRaw(const tcp::wire::Endpoint& e) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(e.port);
  inet_pton(AF_INET, e.address, &sa.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  return fd;
}

void sendRaw(int fd, const void* p, size_t n) { EXPECT_EQ(::send(fd, p, n, MSG_NOSIGNAL), static_cast<ssize_t>(n)); }

/// Rank 1 of two is a real network; rank 0 is `fake`, which speaks the wire format over raw sockets to
/// rank 1's listener (given its endpoint) and whose own endpoint is never used (rank 1 only accepts).
void againstFakeRank0(const std::function<void(const tcp::wire::Endpoint&)>& fake, const std::function<void(Network&)>& body) {
  setenv("CONFLUX_TCP_ADDR", "127.0.0.1", 1);
  ThreadGroup group(2);
  std::thread fakeThread([&] {
    tcp::wire::Endpoint none{};
    std::vector<uint8_t> mine(sizeof none);
    std::memcpy(mine.data(), &none, sizeof none);
    const std::vector<uint8_t> all = group.allGather(0, mine);
    tcp::wire::Endpoint rank1;
    std::memcpy(&rank1, all.data() + sizeof rank1, sizeof rank1);
    fake(rank1);
  });
  transport::NetOpenArgs args;
  args.rank = 1;
  args.nranks = 2;
  args.localRanks = {1};
  args.allGather = [&](const std::vector<uint8_t>& v) { return group.allGather(1, v); };
  args.localAllGather = [](const std::vector<uint8_t>& v) { return v; };
  args.timeoutMs = 10000;
  try {
    std::shared_ptr<Network> net = tcp::openNetwork(args);
    body(*net);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
  }
  fakeThread.join();
}

TEST(TcpNetwork, StrangersAreDroppedAndAHalfMessageFromAClosedPeerIsNotReceived) {
  std::latch closed(1);
  againstFakeRank0(
      [&](const tcp::wire::Endpoint& rank1) {
        ::close(connectRaw(rank1));  // a stranger that closes before saying hello
        const int wrong = connectRaw(rank1);
        const tcp::wire::Hello bad{0x12345678, 0};
        sendRaw(wrong, &bad, sizeof bad);
        // Rank 0 itself: one whole message, then half of one, then it dies.
        const int fd = connectRaw(rank1);
        const tcp::wire::Hello hello{tcp::wire::kHelloMagic, 0};
        sendRaw(fd, &hello, sizeof hello);
        const uint64_t value = 42;
        const tcp::wire::Header whole{2, sizeof value}, half{3, 1 << 20};
        sendRaw(fd, &whole, sizeof whole);
        sendRaw(fd, &value, sizeof value);
        sendRaw(fd, &half, sizeof half);
        std::vector<char> part(1000, 'x');
        sendRaw(fd, part.data(), part.size());
        ::close(fd);
        ::close(wrong);
        closed.count_down();
      },
      [&](Network& net) {
        EXPECT_NE(net.describe().find("tcp sockets to 1 rank(s)"), std::string::npos) << net.describe();
        closed.wait();
        // Read until the close is seen, with no receive posted: both messages arrive unexpected.
        const auto until = Clock::now() + std::chrono::milliseconds(300);
        while (Clock::now() < until) net.poll(until);
        uint64_t got = 0;
        ASSERT_TRUE(wait(net, {net.irecv(0, 2, &got, sizeof got)}).isOk());  // whole: still received
        EXPECT_EQ(got, 42u);
        std::vector<char> big(1 << 20);
        Request r = net.irecv(0, 3, big.data(), big.size());
        const Status s = wait(net, {r}, std::chrono::seconds(2));
        EXPECT_EQ(r.status().code(), Code::RemoteError) << s.message();  // not a timeout: it fails at once
        EXPECT_NE(r.status().message().find("connection to rank 0 closed by the peer"), std::string::npos)
            << r.status().message();
      });
}

TEST(TcpNetwork, AHeaderForMoreThanMemoryBreaksTheConnectionWithAClearError) {
  std::latch done(1);
  againstFakeRank0(
      [&](const tcp::wire::Endpoint& rank1) {
        const int fd = connectRaw(rank1);
        const tcp::wire::Hello hello{tcp::wire::kHelloMagic, 0};
        sendRaw(fd, &hello, sizeof hello);
        const tcp::wire::Header huge{5, uint64_t{1} << 62};
        sendRaw(fd, &huge, sizeof huge);
        done.wait();
        ::close(fd);
      },
      [&](Network& net) {
        uint64_t x = 0;
        Request r = net.irecv(0, 6, &x, sizeof x);
        const Status s = wait(net, {r}, std::chrono::seconds(5));
        EXPECT_EQ(s.code(), Code::RemoteError) << s.message();
        EXPECT_NE(s.message().find("rank 0 sent a header for 4611686018427387904 bytes, more than this rank can hold"),
                  std::string::npos)
            << s.message();
        done.count_down();
      });
}

TEST(NetworkRegistry, ListsTheBuiltTransportsAndRefusesOthersByName) {
  std::vector<std::string> names;
  for (const transport::NetEntry& e : transport::networks()) names.emplace_back(e.name);
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.back(), "tcp");  // in every build, after libfabric where that is built
  setenv("CONFLUX_NET", "carrier-pigeon", 1);
  try {
    transport::openNetwork(transport::NetOpenArgs{});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("CONFLUX_NET='carrier-pigeon'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tcp"), std::string::npos) << e.what();
  }
  unsetenv("CONFLUX_NET");
}

}  // namespace
}  // namespace conflux
