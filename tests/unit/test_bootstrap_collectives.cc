// Bootstrap collectives (allGather, barrier, subsets) with threads as ranks, and missing-rank errors.
#include <gtest/gtest.h>

#include <atomic>

#include "core/bootstrap/bootstrap.h"
#include "core/bootstrap/store_server.h"
#include "core/error.h"
#include "test_bootstrap_util.h"

using namespace cfxtest;

namespace {

class BootstrapCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StoreServer::start("127.0.0.1", 0, testSecret(3));
    id_ = server_->uniqueId();
  }
  Bootstrap make(int rank, int n, std::chrono::milliseconds timeout = 10000ms, const std::string& ns = "job") {
    return Bootstrap(std::make_unique<StoreClient>(id_, timeout), rank, n, ns);
  }
  std::shared_ptr<StoreServer> server_;
  UniqueId id_;
};

std::vector<uint8_t> payload(int rank, int round, size_t size) {
  std::vector<uint8_t> v(size);
  for (size_t i = 0; i < size; ++i) v[i] = static_cast<uint8_t>(rank * 31 + round * 7 + i);
  return v;
}

}  // namespace

TEST_F(BootstrapCollectives, AllGatherBarrierAndSubsetsFor1To8Ranks) {
  for (int n = 1; n <= 8; ++n) {
    auto errors = runRanks(n, [&](int rank) {
      Bootstrap b(std::make_unique<StoreClient>(id_, 10000ms), rank, n, std::string("n").append(std::to_string(n)));
      ASSERT_EQ(b.rank(), rank);
      ASSERT_EQ(b.nranks(), n);
      for (int round = 0; round < 4; ++round) {
        size_t size = round == 3 ? 0 : 1 + 13 * round;
        auto all = b.allGather(payload(rank, round, size));
        ASSERT_EQ(all.size(), n * size);
        for (int r = 0; r < n; ++r) {
          auto want = payload(r, round, size);
          ASSERT_TRUE(std::equal(want.begin(), want.end(), all.begin() + r * size)) << "rank " << r;
        }
        b.barrier();
      }
      std::vector<int> evens, odds;
      for (int r = 0; r < n; ++r) (r % 2 ? odds : evens).push_back(r);
      const auto& group = rank % 2 ? odds : evens;
      for (int round = 0; round < 3; ++round) {
        auto got = b.allGatherAmong(group, payload(rank, round, 9));
        ASSERT_EQ(got.size(), group.size() * 9);
        for (size_t i = 0; i < group.size(); ++i) {
          auto want = payload(group[i], round, 9);
          ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin() + i * 9));
        }
        b.barrierAmong(group);
      }
      b.barrier();
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "n=" << n << " rank " << r;
  }
}

TEST_F(BootstrapCollectives, OldKeysAreDeletedSoTheStoreStaysSmall) {
  constexpr int n = 4;
  auto errors = runRanks(n, [&](int rank) {
    Bootstrap b = make(rank, n);
    for (int i = 0; i < 20; ++i) {
      b.allGather(payload(rank, i, 4));
      b.barrier();
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  // At most the last two rounds of each: 2 * (4 gather keys + 4 arrival keys + count + done).
  EXPECT_LE(server_->keyCount(), 2u * (n + n + 2));
}

TEST_F(BootstrapCollectives, MissingRankTimesOutNamingIt) {
  auto errors = runRanks(2, [&](int rank) {
    Bootstrap b = make(rank, 3, 300ms);
    b.allGather(payload(rank, 0, 4));
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("allGather #0 timed out after 300 ms: rank(s) 2 never arrived"), std::string::npos)
        << errors[r];
  }
  errors = runRanks(3, [&](int rank) {
    if (rank == 1) return;
    Bootstrap b = make(rank, 4, 300ms);
    b.barrier();
  });
  EXPECT_NE(errors[0].find("barrier #0 timed out after 300 ms: rank(s) 1, 3 never arrived"), std::string::npos)
      << errors[0];
  try {
    Bootstrap b = make(0, 2, 200ms, "other");
    b.allGatherAmong({0, 1}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::Timeout);
  }
}

TEST_F(BootstrapCollectives, MisuseIsReported) {
  EXPECT_THROW(make(2, 2), Error);
  EXPECT_THROW(make(-1, 2), Error);
  Bootstrap b = make(0, 3);
  try {
    b.allGatherAmong({0, 0}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
  }
  try {
    b.allGatherAmong({1, 2}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidUsage);
  }
  auto errors = runRanks(2, [&](int rank) {
    Bootstrap bb = make(rank, 2);
    bb.allGather(std::vector<uint8_t>(rank + 1));
  });
  EXPECT_NE(errors[0].find("contributed 2 bytes"), std::string::npos) << errors[0];
}

TEST_F(BootstrapCollectives, FinishLetsTheStoreHostWaitForEveryone) {
  constexpr int n = 4;
  std::atomic<int> finished{0};
  auto errors = runRanks(n, [&](int rank) {
    Bootstrap b = make(rank, n);
    b.allGather({static_cast<uint8_t>(rank)});
    if (rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(20 * rank));
    if (rank != 0) ++finished;  // before counting out, so the host must see all of them
    b.finish(rank == 0);
    if (rank == 0 && finished.load() < n - 1) throw std::runtime_error("host returned before the others finished");
    try {
      b.barrier();
    } catch (const Error& e) {
      if (e.code() != Code::InvalidUsage) throw;
      return;
    }
    throw std::runtime_error("the store was usable after finish()");
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");

  errors = runRanks(2, [&](int rank) {
    Bootstrap b = make(rank, 3, 300ms, "fin2");
    b.finish(rank == 0);
  });
  EXPECT_NE(errors[0].find("finish timed out after 300 ms: rank(s) 2 never arrived"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[1], "");
}
