// ShmWorld setup and control plane: segment create/map/unlink, failure cleanup, staging, shared error
// slot, call descriptors. Multi-rank tests use real processes (fork).
#include <fcntl.h>

#include "core/error.h"
#include "test_shm_util.h"

using conflux::Code;
using conflux::Error;
using conflux::shm::CallDescriptor;
using conflux::shm::SharedError;
using conflux::shm::ShmWorld;
using namespace shmtest;

namespace {

/// Every rank creates, checks that no segment of the tag remains, and exchanges data through staging.
void createMapUnlink(const std::string& dir, int n) {
  const std::string tag = makeTag();
  Ranks ranks(n);
  ranks.run([&](int rank) {
    auto w = ShmWorld::create(smallConfig(dir, tag, rank, n), ranks.exchange(rank));
    SHM_CHECK(w->localRank() == rank && w->localSize() == n);
    SHM_CHECK(countSegments(dir, tag) == 0);  // create() returned: every rank has unlinked its own
    SHM_CHECK(w->stagingBytes() >= (64u << 10));
    for (int r = 0; r < n; ++r) {
      SHM_CHECK(reinterpret_cast<uintptr_t>(w->staging(r, 0)) % 4096 == 0);
      SHM_CHECK(w->staging(r, 1) - w->staging(r, 0) == static_cast<ptrdiff_t>(w->stagingBytes()));
      SHM_CHECK(w->staging(r, 2) == w->staging(r, 0));
    }
    // Write both halves of own staging, barrier, read every peer's.
    for (uint64_t e = 0; e < 2; ++e) std::memset(w->staging(rank, e), 0x10 * rank + int(e), w->stagingBytes());
    const uint64_t g = w->barrierArrive();
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }));
    for (int r = 0; r < n; ++r)
      for (uint64_t e = 0; e < 2; ++e) {
        const auto* p = reinterpret_cast<const unsigned char*>(w->staging(r, e));
        SHM_CHECK(p[0] == 0x10 * r + e && p[w->stagingBytes() - 1] == 0x10 * r + e);
      }
    const uint64_t g2 = w->barrierArrive();  // nobody unmaps while others still read
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g2); }));
  });
  EXPECT_EQ(countSegments(dir, tag), 0);
}

/// Runs `n` ranks whose create() must throw; returns the codes (as exit codes 10 + code).
void expectAllThrow(Ranks& ranks, const std::function<conflux::shm::ShmConfig(int)>& cfg,
                    const std::vector<Code>& codes, const std::string& mustMention) {
  ranks.start([&](int rank) {
    try {
      ShmWorld::create(cfg(rank), ranks.exchange(rank));
    } catch (const Error& e) {
      std::printf("[rank %d] expected error: %s\n", rank, e.what());
      std::fflush(stdout);
      SHM_CHECK(std::string(e.what()).find(mustMention) != std::string::npos);
      ::_exit(10 + static_cast<int>(e.code()));
    }
    ::_exit(1);
  });
  for (int r = 0; r < ranks.size(); ++r) EXPECT_EQ(ranks.wait(r), 10 + static_cast<int>(codes[r])) << "rank " << r;
}

}  // namespace

TEST(ShmWorld, SingleRankInProcess) {
  TempDir dir;
  auto w = ShmWorld::create(smallConfig(dir.path, makeTag(), 0, 1), soloExchange());
  EXPECT_EQ(countSegments(dir.path, ""), 0);
  EXPECT_EQ(w->localSize(), 1);
  const uint64_t g = w->barrierArrive();
  EXPECT_TRUE(w->barrierReached(g));
  EXPECT_FALSE(w->barrierReached(g + 1));
  EXPECT_FALSE(w->error().has_value());
  EXPECT_TRUE(w->deadPeers().empty());
  const uint32_t before = w->doorbell();
  w->wakeSelf();
  EXPECT_NE(w->doorbell(), before);
  EXPECT_THROW(w->sendTo(0), Error);
  EXPECT_THROW(w->recvFrom(1), Error);
  std::memset(w->staging(0, 0), 1, w->stagingBytes());
  std::memset(w->staging(0, 1), 2, w->stagingBytes());
}

TEST(ShmWorld, CreateMapUnlinkInTempDir) { TempDir dir; createMapUnlink(dir.path, 4); }

TEST(ShmWorld, CreateMapUnlinkInDevShm) {
  if (::access("/dev/shm", W_OK) != 0) GTEST_SKIP() << "/dev/shm is not writable";
  createMapUnlink("/dev/shm", 3);
}

TEST(ShmWorld, InvalidConfigThrows) {
  TempDir dir;
  auto expectInvalid = [&](conflux::shm::ShmConfig c) {
    try {
      ShmWorld::create(c, soloExchange());
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::InvalidArgument) << e.what();
    }
  };
  auto c = smallConfig(dir.path, "../etc", 0, 1);
  expectInvalid(c);
  c = smallConfig(dir.path, makeTag(), 1, 1);
  expectInvalid(c);
  c = smallConfig(dir.path, "", 0, 1);
  expectInvalid(c);
  EXPECT_EQ(countSegments(dir.path, ""), 0);
}

TEST(ShmWorld, MissingDirThrowsAndLeavesNothing) {
  TempDir dir;
  const std::string missing = dir.path + "/does-not-exist";
  // Single rank in process: the message names the path.
  try {
    ShmWorld::create(smallConfig(missing, makeTag(), 0, 1), soloExchange());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::SystemError);
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  // Two ranks: both fail with their own error, nobody hangs.
  Ranks ranks(2);
  const std::string tag = makeTag();
  expectAllThrow(ranks, [&](int r) { return smallConfig(missing, tag, r, 2); },
                 {Code::SystemError, Code::SystemError}, "does-not-exist");
  EXPECT_EQ(countSegments(dir.path, ""), 0);
}

TEST(ShmWorld, OneRankFailsEveryRankThrows) {
  TempDir dir;
  const std::string tag = makeTag();
  // A stale file occupies rank 1's name: rank 1 fails with EEXIST, ranks 0 and 2 with RemoteError naming
  // rank 1; their own segments are removed, the stale file is not ours and stays.
  const std::string stale = dir.path + "/conflux-" + tag + "-1";
  const int fd = ::open(stale.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  Ranks ranks(3);
  expectAllThrow(ranks, [&](int r) { return smallConfig(dir.path, tag, r, 3); },
                 {Code::RemoteError, Code::SystemError, Code::RemoteError}, "conflux-" + tag + "-1");
  EXPECT_EQ(countSegments(dir.path, tag), 1);
  EXPECT_TRUE(std::filesystem::exists(stale));
}

TEST(ShmWorld, LayoutMismatchEveryRankThrows) {
  TempDir dir;
  const std::string tag = makeTag();
  Ranks ranks(2);
  expectAllThrow(ranks,
                 [&](int r) { return smallConfig(dir.path, tag, r, 2, r == 0 ? 64 << 10 : 128 << 10); },
                 {Code::InvalidArgument, Code::InvalidArgument}, "segment size");
  EXPECT_EQ(countSegments(dir.path, tag), 0);
}

TEST(ShmError, PostedErrorSeenByAllFirstWins) {
  TempDir dir;
  const std::string tag = makeTag();
  const int n = 4;
  Ranks ranks(n);
  ranks.run([&](int rank) {
    auto w = ShmWorld::create(smallConfig(dir.path, tag, rank, n), ranks.exchange(rank));
    SHM_CHECK(!w->error().has_value());
    const uint64_t g0 = w->barrierArrive();  // everyone checked before anyone posts
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g0); }));
    if (rank == 2) w->postError({int(Code::RemoteError), 101, 102, std::string(300, 'x') + "tail"});
    // Everyone (rank 2 included) sees it; rank 3 then posts a second error that must not replace it.
    SHM_CHECK(waitFor(*w, [&] { return w->error().has_value(); }));
    if (rank == 3) w->postError({int(Code::Timeout), 7, 103, "second"});
    const SharedError e = *w->error();
    SHM_CHECK(e.code == int(Code::RemoteError) && e.failedRank == 101 && e.reporterRank == 102);
    SHM_CHECK(e.message == std::string(200, 'x'));
    const uint64_t g = w->barrierArrive();
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }));
    SHM_CHECK(w->error()->reporterRank == 102);
  });
}

TEST(ShmCall, PeerCallValidatesSequence) {
  TempDir dir;
  const std::string tag = makeTag();
  Ranks ranks(3);
  auto descriptor = [](int rank, uint64_t seq) {
    return CallDescriptor{seq,           uint32_t(seq % 7),  uint32_t(rank),
                          uint32_t(seq * 3), int32_t(rank - 1), seq * 1000 + rank};
  };
  ranks.run([&](int rank) {
    auto w = ShmWorld::create(smallConfig(dir.path, tag, rank, 3), ranks.exchange(rank));
    for (uint64_t s = 1; s <= 40; ++s) w->publishCall(descriptor(rank, s));
    uint64_t g = w->barrierArrive();
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }));
    for (int p = 0; p < 3; ++p) {
      for (uint64_t s = 25; s <= 40; ++s) {
        const auto d = w->peerCall(p, s);
        const auto want = descriptor(p, s);
        SHM_CHECK(d && d->seq == s && d->coll == want.coll && d->dtype == want.dtype && d->op == want.op &&
                  d->root == want.root && d->count == want.count);
      }
      SHM_CHECK(!w->peerCall(p, 24));  // overwritten by call 40
      SHM_CHECK(!w->peerCall(p, 41));  // not yet published
      SHM_CHECK(!w->peerCall(p, 0));
    }
    g = w->barrierArrive();
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }));
    // Concurrent: rank 0 publishes quickly while rank 1 reads; anything returned must be consistent.
    // The writer publishes until told to stop and announces the latest call in a shared word; the reader
    // asks for it and its neighbours (some being overwritten right then).
    auto& latest = ranks.area().words[0];
    auto& stop = ranks.area().words[1];
    if (rank == 0) {
      for (uint64_t s = 41; stop.load(std::memory_order_relaxed) == 0; ++s) {
        w->publishCall(descriptor(0, s));
        latest.store(s, std::memory_order_release);
      }
    } else if (rank == 1) {
      const double deadline = nowUs() + 10e6;
      while (latest.load(std::memory_order_acquire) < 1000) {  // let the writer get going
        SHM_CHECK(nowUs() < deadline);
        sched_yield();
      }
      uint64_t valid = 0;
      for (int i = 0; i < 200000 && valid < 50000; ++i) {
        const uint64_t s = latest.load(std::memory_order_acquire);
        for (uint64_t q = s > 2 ? s - 2 : 1; q <= s + 2; ++q) {
          if (const auto d = w->peerCall(0, q)) {
            const auto want = descriptor(0, q);
            SHM_CHECK(d->seq == q && d->count == want.count && d->op == want.op && d->coll == want.coll &&
                      d->dtype == want.dtype && d->root == want.root);
            ++valid;
          }
        }
      }
      stop.store(1);
      std::printf("[ShmCall] %llu consistent descriptors read while the peer published\n",
                  static_cast<unsigned long long>(valid));
      SHM_CHECK(valid > 0);
    }
    g = w->barrierArrive();
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }));
  });
}

// A member's published progress keeps the hop count it was published with (LocalGroup::publishProgress):
// read back as published, only a later time replaces it, and a reader asking for another call sees none.
// Then rank 0 publishes ever later times whose count is a function of the time while rank 1 reads: a
// reader must never see a time with another time's count.
TEST(ShmProgress, PublishedTimeKeepsItsHopCount) {
  TempDir dir;
  const std::string tag = makeTag();
  Ranks ranks(2);
  auto hopsOf = [](int64_t ns) { return uint32_t(ns % 8); };
  ranks.run([&](int rank) {
    auto w = ShmWorld::create(smallConfig(dir.path, tag, rank, 2), ranks.exchange(rank));
    if (rank == 0) {
      w->publishProgress(5000, 3, 6);
      w->publishProgress(4000, 3, 1);  // earlier: ignored
    }
    uint64_t g = w->barrierArrive();
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }));
    if (rank == 1) {
      const auto p = w->peerProgress(0, 3);
      SHM_CHECK(p.ns == 5000 && p.hops == 6);
      SHM_CHECK(w->peerProgress(0, 4).ns == 0);  // another call
    }
    g = w->barrierArrive();
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }));
    if (rank == 0) w->publishProgress(6000, 3, 0);
    g = w->barrierArrive();
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }));
    if (rank == 1) {
      const auto p = w->peerProgress(0, 3);
      SHM_CHECK(p.ns == 6000 && p.hops == 0);
    }
    g = w->barrierArrive();
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }));
    auto& stop = ranks.area().words[2];
    if (rank == 0) {
      for (int64_t ns = 7000; stop.load(std::memory_order_relaxed) == 0; ++ns) w->publishProgress(ns, 3, hopsOf(ns));
    } else {
      uint64_t seen = 0;
      int64_t last = 0;
      for (int i = 0; i < 200000; ++i) {
        const auto p = w->peerProgress(0, 3);
        SHM_CHECK(p.ns >= last && p.hops == hopsOf(p.ns));
        seen += p.ns != last ? 1 : 0;
        last = p.ns;
      }
      stop.store(1);
      std::printf("[ShmProgress] %llu distinct times read while the peer published\n", static_cast<unsigned long long>(seen));
    }
    g = w->barrierArrive();
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }));
  });
}
