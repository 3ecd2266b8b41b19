// The tcp network transport (transport/tcp/tcp_network.h) in one process: threads are ranks, each a node
// of its own, on 127.0.0.1.
#include <gtest/gtest.h>

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

#include "transport/tcp/tcp_network.h"

namespace conflux {
namespace {

using transport::Clock;
using transport::Network;
using transport::Request;

/// One all-gather among `n` threads (each call of a round waits for the others).
class ThreadAllGather {
 public:
  explicit ThreadAllGather(int n) : n_(n), parts_(n) {}
  std::vector<uint8_t> operator()(int rank, const std::vector<uint8_t>& mine) {
    std::unique_lock<std::mutex> lock(mutex_);
    const int round = round_;
    parts_[rank] = mine;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++round_;
      result_.clear();
      for (const auto& p : parts_) result_.insert(result_.end(), p.begin(), p.end());
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return round_ != round; });
    }
    return result_;
  }

 private:
  int n_;
  std::vector<std::vector<uint8_t>> parts_;
  std::vector<uint8_t> result_;
  int arrived_ = 0;
  int round_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
};

/// Runs `body(rank, net)` on `n` threads, each rank a node of its own.
void runRanks(int n, const std::function<void(int, Network&)>& body) {
  setenv("CONFLUX_TCP_ADDR", "127.0.0.1", 1);
  ThreadAllGather gather(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      transport::NetOpenArgs args;
      args.rank = r;
      args.nranks = n;
      args.localRanks = {r};
      args.allGather = [&, r](const std::vector<uint8_t>& v) { return gather(r, v); };
      args.localAllGather = [](const std::vector<uint8_t>& v) { return v; };
      args.timeoutMs = 10000;
      std::shared_ptr<Network> net = tcp::openNetwork(args);
      body(r, *net);
    });
  }
  for (auto& t : threads) t.join();
}

Status wait(Network& net, std::vector<Request> reqs) {
  return transport::waitAll(net, reqs, Clock::now() + std::chrono::seconds(10), "test");
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
