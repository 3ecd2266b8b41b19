// The libfabric transport between forked processes on 127.0.0.1: a plain exchange, a killed peer and a
// silent peer (both must end in an error naming the peer within the deadline), the same for RMA writes
// (a target that dies or stops driving progress mid-write), provider defaults that respect the user's
// own settings.
#include <csignal>

#include "test_ofi_util.h"
#include "transport/ofi/fabric.h"

namespace {

using namespace ofitest;
using conflux::Code;

TEST(OfiProcesses, ExchangeBetweenProcesses) {
  const size_t kBytes = (size_t(1) << 20) + 7;
  auto codes = runForked([&](int rank, const conflux::ofi::AllGather& ag) {
    auto t = Transport::create(loopbackOptions(rank, 2), ag);
    std::vector<uint8_t> out(kBytes), in(kBytes);
    fillPattern(out, rank, 1);
    const int peer = 1 - rank;
    std::vector<Request> reqs = {t->irecv(peer, 1, in.data(), kBytes), t->isend(peer, 1, out.data(), kBytes)};
    conflux::Status s = t->wait(reqs);
    if (!s.isOk()) std::fprintf(stderr, "rank %d: %s\n", rank, s.message().c_str());
    OFI_CHECK(s.isOk());
    OFI_CHECK(firstMismatch(in, kBytes, peer, 1) == -1);
    // Both must be done before either closes: one more round trip.
    uint8_t b = 0;
    std::vector<Request> fin = {t->irecv(peer, 2, &b, 1), t->isend(peer, 2, &b, 1)};
    OFI_CHECK(t->wait(fin).isOk());
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(OfiProcesses, KilledPeerIsAnErrorNamingItWithinTheDeadline) {
  auto codes = runForked([&](int rank, const conflux::ofi::AllGather& ag) {
    auto t = Transport::create(loopbackOptions(rank, 2), ag);
    if (rank == 1) {
      // Take part in one message so the connection exists, then die without closing anything.
      uint8_t b = 0;
      Request r = t->irecv(0, 1, &b, 1);
      OFI_CHECK(t->wait(r).isOk());
      ::kill(::getpid(), SIGKILL);
      ::pause();
    }
    uint8_t b = 1;
    Request s = t->isend(1, 1, &b, 1);
    OFI_CHECK(t->wait(s).isOk());
    std::this_thread::sleep_for(300ms);  // rank 1 is dead by now
    const size_t kBytes = size_t(8) << 20;
    std::vector<uint8_t> big(kBytes, 7), in(4096);
    std::vector<Request> reqs = {t->isend(1, 2, big.data(), kBytes), t->irecv(1, 3, in.data(), in.size())};
    const auto t0 = std::chrono::steady_clock::now();
    conflux::Status st = t->wait(reqs, conflux::ofi::Clock::now() + 3s);
    const auto waited = std::chrono::steady_clock::now() - t0;
    std::fprintf(stderr, "rank 0 saw: %s (%s) after %lld ms\n", conflux::codeName(st.code()), st.message().c_str(),
                 (long long)std::chrono::duration_cast<std::chrono::milliseconds>(waited).count());
    OFI_CHECK(!st.isOk());
    OFI_CHECK(st.message().find("rank 1") != std::string::npos);
    OFI_CHECK(waited < 4500ms);
    return 0;
  }, 60s);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], -SIGKILL);
}

TEST(OfiProcesses, PeerDeathDuringAWriteIsAnErrorNamingIt) {
  constexpr size_t kBytes = size_t(16) << 20;
  auto codes = runForked([&](int rank, const conflux::ofi::AllGather& ag) {
    auto t = Transport::create(loopbackOptions(rank, 2), ag);
    conflux::ofi::RemoteKey key;
    if (rank == 1) {
      std::vector<uint8_t> region(kBytes);
      OFI_CHECK(t->exposeMemory(region.data(), region.size(), &key).isOk());
      Request s = t->isend(0, 1, &key, sizeof key);
      OFI_CHECK(t->wait(s).isOk());
      // Stop driving progress while rank 0 writes (its chunks wait for this side), then die.
      std::this_thread::sleep_for(200ms);
      ::kill(::getpid(), SIGKILL);
      ::pause();
    }
    Request r = t->irecv(1, 1, &key, sizeof key);
    OFI_CHECK(t->wait(r).isOk());
    std::vector<uint8_t> src(kBytes, 5);
    Request w = t->iwrite(1, src.data(), kBytes, key, 0);
    const auto t0 = std::chrono::steady_clock::now();
    conflux::Status st = t->wait(w, conflux::ofi::Clock::now() + 3s);
    const auto waited = std::chrono::steady_clock::now() - t0;
    std::fprintf(stderr, "rank 0 saw: %s (%s) after %lld ms\n", conflux::codeName(st.code()), st.message().c_str(),
                 (long long)std::chrono::duration_cast<std::chrono::milliseconds>(waited).count());
    OFI_CHECK(!st.isOk());
    OFI_CHECK(st.message().find("write to rank 1") != std::string::npos);
    OFI_CHECK(waited < 4500ms);
    return 0;
  }, 60s);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], -SIGKILL);
}

TEST(OfiProcesses, WriteToATargetThatStopsProgressingTimesOutNamingIt) {
  constexpr size_t kBytes = size_t(16) << 20;
  auto codes = runForked([&](int rank, const conflux::ofi::AllGather& ag) {
    auto t = Transport::create(loopbackOptions(rank, 2), ag);
    conflux::ofi::RemoteKey key;
    std::vector<uint8_t> buf(kBytes, 5);
    if (rank == 1) {
      OFI_CHECK(t->exposeMemory(buf.data(), buf.size(), &key).isOk());
      Request s = t->isend(0, 1, &key, sizeof key);
      OFI_CHECK(t->wait(s).isOk());
      std::this_thread::sleep_for(1500ms);  // alive, but places nothing (manual progress)
      return 0;
    }
    Request r = t->irecv(1, 1, &key, sizeof key);
    OFI_CHECK(t->wait(r).isOk());
    Request w = t->iwrite(1, buf.data(), kBytes, key, 0);
    conflux::Status st = t->wait(w, conflux::ofi::Clock::now() + 500ms);
    std::fprintf(stderr, "rank 0 saw: %s (%s)\n", conflux::codeName(st.code()), st.message().c_str());
    OFI_CHECK(st.code() == Code::Timeout);
    OFI_CHECK(st.message().find("write to rank 1") != std::string::npos);
    OFI_CHECK(st.message().find("driving progress") != std::string::npos);
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(OfiProcesses, SilentPeerTimesOutNamingIt) {
  auto codes = runForked([&](int rank, const conflux::ofi::AllGather& ag) {
    auto t = Transport::create(loopbackOptions(rank, 2), ag);
    if (rank == 1) {
      std::this_thread::sleep_for(1500ms);  // alive, but never sends
      return 0;
    }
    std::vector<uint8_t> in(size_t(1) << 20);
    Request r = t->irecv(1, 9, in.data(), in.size());
    const auto t0 = std::chrono::steady_clock::now();
    conflux::Status st = t->wait(r, conflux::ofi::Clock::now() + 500ms);
    const auto waited = std::chrono::steady_clock::now() - t0;
    OFI_CHECK(st.code() == Code::Timeout);
    OFI_CHECK(st.message().find("recv from rank 1") != std::string::npos);
    OFI_CHECK(waited >= 490ms && waited < 2000ms);
    return 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(OfiProcesses, ProviderDefaultsRespectTheUser) {
  // In a child, so that this process's environment stays as it was.
  conflux::testing::ChildProcesses child(1);
  child.start([](int) {
    ::unsetenv("CONFLUX_OFI_PROVIDER_DEFAULTS");
    ::unsetenv("FI_OFI_RXM_EAGER_LIMIT");
    auto applied = conflux::ofi::setProviderDefaultsIfUnset();
    EXPECT_EQ(applied, std::vector<std::string>{"FI_OFI_RXM_EAGER_LIMIT"});
    EXPECT_STREQ(std::getenv("FI_OFI_RXM_EAGER_LIMIT"), "65536");
    ::setenv("FI_OFI_RXM_EAGER_LIMIT", "32768", 1);
    EXPECT_TRUE(conflux::ofi::setProviderDefaultsIfUnset().empty());
    EXPECT_STREQ(std::getenv("FI_OFI_RXM_EAGER_LIMIT"), "32768");
    ::unsetenv("FI_OFI_RXM_EAGER_LIMIT");
    ::setenv("CONFLUX_OFI_PROVIDER_DEFAULTS", "0", 1);
    EXPECT_TRUE(conflux::ofi::setProviderDefaultsIfUnset().empty());
    EXPECT_EQ(std::getenv("FI_OFI_RXM_EAGER_LIMIT"), nullptr);
    return 0;
  });
  EXPECT_TRUE(conflux::testing::allSucceeded(child.waitAll(std::chrono::seconds(60))));
}

}  // namespace
