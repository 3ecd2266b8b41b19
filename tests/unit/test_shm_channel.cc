// Shared-memory channels between real processes: streaming with wrap-around, all pairs at once, and a
// ping-pong that spins or sleeps.
#include <algorithm>

#include "test_shm_util.h"

using conflux::shm::ShmWorld;
using namespace shmtest;

namespace {

/// Deterministic pseudo-random bytes; stream offset i carries pattern[i % size()]. The size is odd so
/// pattern boundaries never line up with the ring's.
std::vector<unsigned char> makePattern(uint64_t seed) {
  std::vector<unsigned char> p(1000003);
  std::mt19937_64 rng(seed);
  for (auto& b : p) b = static_cast<unsigned char>(rng());
  return p;
}

/// Checks that `data` equals the pattern stream from offset `streamOffset` on.
void checkPattern(std::span<const std::byte> data, uint64_t streamOffset, const std::vector<unsigned char>& pat) {
  size_t done = 0;
  while (done < data.size()) {  // compare in pieces that do not cross the pattern's end
    const uint64_t off = (streamOffset + done) % pat.size();
    const size_t piece = std::min<uint64_t>(data.size() - done, pat.size() - off);
    SHM_CHECK(std::memcmp(data.data() + done, pat.data() + off, piece) == 0);
    done += piece;
  }
}

/// Sends `total` bytes of the pattern to `peer` in random-sized writes; spin-then-sleep when full.
void sendStream(ShmWorld& w, int peer, const std::vector<unsigned char>& pat, uint64_t total, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto& ch = w.sendTo(peer);
  uint64_t sent = 0;
  while (sent < total) {
    const uint64_t off = sent % pat.size();
    const size_t want = std::min<uint64_t>({1 + rng() % 200000, total - sent, pat.size() - off});
    size_t n = ch.write(pat.data() + off, want);
    if (n == 0) {
      SHM_CHECK(waitFor(w, [&] { return ch.writable() > 0; }, 100));
      n = ch.write(pat.data() + off, want);
      SHM_CHECK(n > 0);
    }
    sent += n;
  }
}

/// Receives `total` bytes from `peer` in random-sized reads and checks them against the pattern.
void recvStream(ShmWorld& w, int peer, const std::vector<unsigned char>& pat, uint64_t total, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto& ch = w.recvFrom(peer);
  uint64_t got = 0;
  while (got < total) {
    const size_t want = 1 + rng() % 150000;
    auto span = ch.readable(want);
    if (span.empty()) {
      SHM_CHECK(waitFor(w, [&] { return !ch.readable(want).empty(); }, 100));
      span = ch.readable(want);
    }
    SHM_CHECK(span.size() <= want && got + span.size() <= total);
    checkPattern(span, got, pat);
    // Consume in up to two steps to exercise partial consumption.
    const size_t first = span.size() / 2;
    ch.consume(first);
    ch.consume(span.size() - first);
    got += span.size();
  }
  SHM_CHECK(ch.readable(1).empty());
}

}  // namespace

TEST(ShmChannel, StreamRandomPiecesWrapAround) {
  TempDir dir;
  const std::string tag = makeTag();
  const auto pat = makePattern(42);
  constexpr uint64_t kTotal = 64ull << 20;
  Ranks ranks(2);
  ranks.run([&](int rank) {
    auto w = ShmWorld::create(smallConfig(dir.path, tag, rank, 2, 64 << 10), ranks.exchange(rank));
    const double t0 = nowUs();
    if (rank == 0) {
      SHM_CHECK(w->sendTo(1).writable() == (64u << 10));
      sendStream(*w, 1, pat, kTotal, 7);
    } else {
      recvStream(*w, 0, pat, kTotal, 8);
      const double s = (nowUs() - t0) / 1e6;
      std::printf("[ShmChannel] 64 MiB through a 64 KiB ring in %.3f s (%.2f GB/s)\n", s, kTotal / s / 1e9);
    }
    const uint64_t g = w->barrierArrive();
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }));
  });
}

TEST(ShmChannel, AllPairsConcurrently) {
  // Four processes on two cores, each streaming to each of the others while receiving from them, from one
  // thread per process: round-robin progress, sleeping on the doorbell when nothing moves.
  TempDir dir;
  const std::string tag = makeTag();
  const auto pat = makePattern(43);
  constexpr int kRanks = 4;
  constexpr uint64_t kTotal = 4ull << 20;
  Ranks ranks(kRanks);
  ranks.run([&](int rank) {
    auto w = ShmWorld::create(smallConfig(dir.path, tag, rank, kRanks, 16 << 10), ranks.exchange(rank));
    std::vector<uint64_t> sent(kRanks, 0), got(kRanks, 0);
    auto done = [&] {
      for (int p = 0; p < kRanks; ++p)
        if (p != rank && (sent[p] < kTotal || got[p] < kTotal)) return false;
      return true;
    };
    // Each peer p gets the pattern starting at offset 1000*rank, so streams differ per sender.
    while (!done()) {
      const uint32_t seen = w->doorbell();
      bool progress = false;
      for (int p = 0; p < kRanks; ++p) {
        if (p == rank) continue;
        if (sent[p] < kTotal) {
          const uint64_t off = (sent[p] + 1000 * rank) % pat.size();
          const size_t want = std::min<uint64_t>({5000 + sent[p] % 7919, kTotal - sent[p], pat.size() - off});
          const size_t n = w->sendTo(p).write(pat.data() + off, want);
          sent[p] += n;
          progress |= n > 0;
        }
        auto span = w->recvFrom(p).readable(kTotal);
        if (!span.empty()) {
          checkPattern(span, got[p] + 1000 * p, pat);
          got[p] += span.size();
          w->recvFrom(p).consume(span.size());
          progress = true;
        }
      }
      if (!progress) w->sleep(seen, 1000);
    }
    const uint64_t g = w->barrierArrive();
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }));
  });
}

TEST(ShmChannel, PingPongInOrderSpinningOrSleeping) {
  // Small messages bounced back and forth, each seen by its peer exactly once and in order, whether
  // the waiter spins first or sleeps at once (latency is conflux-perf's to measure, not a test's).
  TempDir dir;
  const std::string tag = makeTag();
  Ranks ranks(2);
  ranks.run([&](int rank) {
    auto w = ShmWorld::create(smallConfig(dir.path, tag, rank, 2), ranks.exchange(rank));
    const int peer = 1 - rank;
    auto& out = w->sendTo(peer);
    auto& in = w->recvFrom(peer);
    auto pingPong = [&](int iters, int spin) {
      uint64_t msg = 0;
      for (int i = 0; i < iters; ++i) {
        if (rank == 0) {
          msg = i;
          SHM_CHECK(out.write(&msg, 8) == 8);
        }
        SHM_CHECK(waitFor(*w, [&] { return in.readable(8).size() == 8; }, spin, 5000));
        std::memcpy(&msg, in.readable(8).data(), 8);
        in.consume(8);
        SHM_CHECK(msg == static_cast<uint64_t>(i));
        if (rank == 1) SHM_CHECK(out.write(&msg, 8) == 8);
      }
    };
    pingPong(5000, 2000);  // spin 2000 polls, then sleep
    pingPong(1000, 0);     // no spin: check, then sleep
    const uint64_t g = w->barrierArrive();
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }));
  });
}
