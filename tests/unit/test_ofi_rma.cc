// One-sided writes of conflux::ofi::Transport between ranks that are threads of this process
// (tcp;ofi_rxm on 127.0.0.1): sizes around chunk boundaries written into the middle of a larger exposed
// region (guard bytes around it must stay), many chunks in flight, two rails, both visibility mechanisms
// (a notification sent after a write must never arrive before the data), arguments rejected at the
// initiator, the registration cache, writes switched off, and the choice of visibility mechanism.
#include <algorithm>
#include <cstring>

#include "test_ofi_util.h"

namespace {

using namespace ofitest;
using conflux::Code;
using conflux::ofi::RemoteKey;
using conflux::ofi::RmaVisibility;
using conflux::ofi::makeUserTag;

constexpr uint8_t kGuard = 0xee;
constexpr size_t kTail = 4099;  // guard bytes after the largest write

/// Ships `key` from `owner` to every other rank of a 2-rank group by a tagged message; returns it.
RemoteKey shareKey(Transport& t, int owner, const RemoteKey& key) {
  RemoteKey out = key;
  Request r = t.rank() == owner ? t.isend(1 - owner, 1, &out, sizeof out) : t.irecv(owner, 1, &out, sizeof out);
  conflux::Status s = t.wait(r);
  EXPECT_TRUE(s.isOk()) << s.message();
  return out;
}

/// Index of the first byte of `region` that is wrong: [dstOffset, dstOffset+bytes) must hold the pattern
/// of (0, salt), everything else kGuard. -1 when all are right.
long long firstWrongByte(const std::vector<uint8_t>& region, size_t dstOffset, size_t bytes, uint32_t salt) {
  for (size_t i = 0; i < region.size(); ++i) {
    const bool inside = i >= dstOffset && i < dstOffset + bytes;
    if (region[i] != (inside ? patternByte(0, salt, i - dstOffset) : kGuard)) return (long long)i;
  }
  return -1;
}

/// Rank 0 writes one message of each size into the middle of a region rank 1 exposed, then notifies;
/// rank 1 checks the written bytes and the guards on either side as soon as the notification arrives.
void writeSizes(const std::vector<size_t>& sizes, size_t dstOffset, const std::function<void(Options&)>& tweak) {
  const size_t largest = *std::max_element(sizes.begin(), sizes.end());
  runThreads(2, tweak, [&](int rank, Transport& t, ThreadGroup&) {
    ASSERT_NE(t.capabilities().rmaWrites, RmaVisibility::None) << t.capabilities().rmaUnavailable;
    std::vector<uint8_t> region(rank == 1 ? dstOffset + largest + kTail : 0, kGuard);
    RemoteKey key;
    if (rank == 1) {
      conflux::Status s = t.exposeMemory(region.data(), region.size(), &key);
      ASSERT_TRUE(s.isOk()) << s.message();
    }
    key = shareKey(t, 1, key);
    uint8_t note = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const size_t bytes = sizes[i];
      const uint64_t notifyTag = makeUserTag(2, uint32_t(i)), ackTag = makeUserTag(3, uint32_t(i));
      if (rank == 0) {
        std::vector<uint8_t> src(std::max<size_t>(bytes, 1));
        fillPattern(src, 0, uint32_t(i));
        Request w = t.iwrite(1, src.data(), bytes, key, dstOffset);
        conflux::Status s = t.wait(w);
        ASSERT_TRUE(s.isOk()) << bytes << " B: " << s.message();
        Request n = t.isend(1, notifyTag, &note, 1);
        ASSERT_TRUE(t.wait(n).isOk());
        Request a = t.irecv(1, ackTag, &note, 1);  // rank 1 checked and reset the region
        ASSERT_TRUE(t.wait(a).isOk());
      } else {
        Request n = t.irecv(0, notifyTag, &note, 1);
        ASSERT_TRUE(t.wait(n).isOk());
        EXPECT_EQ(firstWrongByte(region, dstOffset, bytes, uint32_t(i)), -1)
            << bytes << " bytes at offset " << dstOffset << " of a " << region.size() << "-byte region";
        std::fill(region.begin(), region.end(), kGuard);
        Request a = t.isend(0, ackTag, &note, 1);
        ASSERT_TRUE(t.wait(a).isOk());
      }
    }
    if (rank == 1) {
      EXPECT_TRUE(t.unexposeMemory(key).isOk());
    }
  });
}

constexpr size_t kChunk = 16384;
const std::vector<size_t> kSizes = {0, 1, 7, kChunk - 1, kChunk, kChunk + 1, (size_t(4) << 20) + 3};

TEST(OfiRma, TcpRxmOffersDeliveryCompleteWrites) {
  runThreads(1, {}, [&](int, Transport& t, ThreadGroup&) {
    const auto& c = t.capabilities();
    EXPECT_TRUE(c.rma);
    EXPECT_TRUE(c.deliveryComplete);      // tcp;ofi_rxm 1.17 accepts it as a transmit flag
    EXPECT_TRUE(c.orderSendAfterWrite);   // and reports FI_ORDER_SAW
    EXPECT_EQ(c.rmaWrites, RmaVisibility::DeliveryComplete);
    EXPECT_TRUE(c.rmaUnavailable.empty()) << c.rmaUnavailable;
  });
}

TEST(OfiRma, SizesAroundChunkBoundariesIntoTheMiddleOfARegion) {
  // 16 KiB chunks: the 4 MiB write is 257 chunks through the default window of 8.
  writeSizes(kSizes, 4096 + 13, [](Options& o) { o.chunkBytes = kChunk; });
}

TEST(OfiRma, TwoRailsStripeWrites) {
  writeSizes(kSizes, 1, [](Options& o) {
    o.chunkBytes = kChunk;
    o.rails = 2;
    o.inflight = 3;
  });
}

TEST(OfiRma, OrderedVisibilityOnOneRail) {
  runThreads(1, [](Options& o) { o.rma = "order"; }, [&](int, Transport& t, ThreadGroup&) {
    EXPECT_EQ(t.capabilities().rmaWrites, RmaVisibility::Ordered);
  });
  writeSizes(kSizes, 512, [](Options& o) {
    o.chunkBytes = kChunk;
    o.rma = "order";
  });
}

/// Many write + notify rounds; the target checks the data the moment the notification is received.
void notifiedWritesAreVisible(const std::function<void(Options&)>& tweak) {
  constexpr int kRounds = 150;
  constexpr size_t kMax = 96 * 1024;
  runThreads(2, tweak, [&](int rank, Transport& t, ThreadGroup&) {
    std::vector<uint8_t> region(rank == 1 ? kMax + 64 : 0, kGuard);
    RemoteKey key;
    if (rank == 1) {
      ASSERT_TRUE(t.exposeMemory(region.data(), region.size(), &key).isOk());
    }
    key = shareKey(t, 1, key);
    std::vector<uint8_t> src(kMax);
    uint8_t note = 0;
    int late = 0;
    for (int i = 0; i < kRounds; ++i) {
      const size_t bytes = 1 + size_t(i) * 7919 % kMax;  // 1 byte .. 96 KiB, several chunks most rounds
      const size_t offset = size_t(i) % 61;
      const uint64_t notifyTag = makeUserTag(4, uint32_t(i)), ackTag = makeUserTag(5, uint32_t(i));
      if (rank == 0) {
        fillPattern(src, 0, uint32_t(1000 + i));
        Request w = t.iwrite(1, src.data(), bytes, key, offset);
        ASSERT_TRUE(t.wait(w).isOk());
        Request n = t.isend(1, notifyTag, &note, 1);  // right away: nothing else orders it after the data
        ASSERT_TRUE(t.wait(n).isOk());
        Request a = t.irecv(1, ackTag, &note, 1);
        ASSERT_TRUE(t.wait(a).isOk());
      } else {
        Request n = t.irecv(0, notifyTag, &note, 1);
        ASSERT_TRUE(t.wait(n).isOk());
        if (firstWrongByte(region, offset, bytes, uint32_t(1000 + i)) != -1) ++late;
        std::fill(region.begin(), region.end(), kGuard);
        Request a = t.isend(0, ackTag, &note, 1);
        ASSERT_TRUE(t.wait(a).isOk());
      }
    }
    EXPECT_EQ(late, 0) << "rounds whose notification arrived before the written data";
  });
}

TEST(OfiRma, NotifiedWritesAreVisibleDeliveryCompleteTwoRails) {
  notifiedWritesAreVisible([](Options& o) {
    o.chunkBytes = 8192;
    o.rails = 2;
  });
}

TEST(OfiRma, NotifiedWritesAreVisibleOrderedOneRail) {
  notifiedWritesAreVisible([](Options& o) {
    o.chunkBytes = 8192;
    o.rma = "order";
  });
}

TEST(OfiRma, BadWritesAreRejectedAtTheInitiator) {
  runThreads(2, {}, [&](int rank, Transport& t, ThreadGroup& g) {
    std::vector<uint8_t> region(1000, kGuard), src(64, 1);
    RemoteKey key;
    if (rank == 1) {
      ASSERT_TRUE(t.exposeMemory(region.data(), region.size(), &key).isOk());
    }
    key = shareKey(t, 1, key);
    if (rank == 0) {
      auto rejected = [&](Request r, Code code, const std::string& needle) {
        EXPECT_TRUE(r.done());  // at once, nothing posted
        EXPECT_EQ(r.status().code(), code) << r.status().message();
        EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
        EXPECT_NE(r.status().message().find("write to rank"), std::string::npos) << r.status().message();
      };
      rejected(t.iwrite(1, src.data(), 10, key, 995), Code::InvalidArgument, "dstOffset (995) + bytes (10) exceeds");
      rejected(t.iwrite(1, src.data(), 1001, key, 0), Code::InvalidArgument, "exceeds the 1000 bytes rank 1 exposed");
      rejected(t.iwrite(1, src.data(), 1, key, SIZE_MAX), Code::InvalidArgument, "dstOffset");
      rejected(t.iwrite(0, src.data(), 1, key, 0), Code::InvalidArgument, "dst was exposed by rank 1");
      rejected(t.iwrite(1, src.data(), 1, RemoteKey{}, 0), Code::InvalidArgument, "dst is not a RemoteKey");
      rejected(t.iwrite(2, src.data(), 1, key, 0), Code::InvalidArgument, "peer");
      rejected(t.iwrite(1, nullptr, 1, key, 0), Code::InvalidArgument, "src");
      // The last 10 bytes fit exactly.
      Request w = t.iwrite(1, src.data(), 10, key, 990);
      EXPECT_TRUE(t.wait(w).isOk());
      uint8_t note = 0;
      Request n = t.isend(1, 2, &note, 1);
      EXPECT_TRUE(t.wait(n).isOk());
    } else {
      uint8_t note = 0;
      Request n = t.irecv(0, 2, &note, 1);  // keeps progressing while rank 0 writes
      EXPECT_TRUE(t.wait(n).isOk());
      EXPECT_EQ(region[989], kGuard);
      EXPECT_EQ(region[990], 1);
      EXPECT_EQ(region[999], 1);
    }
    // The key's owner cannot unexpose a peer's key, nor its own twice.
    if (rank == 0) {
      EXPECT_EQ(t.unexposeMemory(key).code(), Code::InvalidArgument);
    }
    g.barrier();
    if (rank == 1) {
      EXPECT_TRUE(t.unexposeMemory(key).isOk());
      conflux::Status again = t.unexposeMemory(key);
      EXPECT_EQ(again.code(), Code::InvalidArgument);
      EXPECT_NE(again.message().find("not live"), std::string::npos) << again.message();
    }
  });
}

TEST(OfiRma, ExposingTheSameBufferAgainHitsTheCache) {
  runThreads(1, [](Options& o) { o.rails = 2; }, [&](int, Transport& t, ThreadGroup&) {
    std::vector<uint8_t> buf(100000);
    RemoteKey a, b, c;
    ASSERT_TRUE(t.exposeMemory(buf.data(), buf.size(), &a).isOk());
    for (int r = 0; r < 2; ++r) EXPECT_EQ(t.mrCacheStats(r).misses, 1u) << "rail " << r;
    ASSERT_TRUE(t.exposeMemory(buf.data(), buf.size(), &b).isOk());
    ASSERT_TRUE(t.exposeMemory(buf.data() + 100, 1000, &c).isOk());  // inside: a hit as well
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(t.mrCacheStats(r).misses, 1u) << "rail " << r;
      EXPECT_EQ(t.mrCacheStats(r).hits, 2u) << "rail " << r;
      EXPECT_EQ(b.rail[r].key, a.rail[r].key);
      EXPECT_EQ(b.rail[r].base, a.rail[r].base);
      EXPECT_EQ(c.rail[r].base, a.rail[r].base + 100);  // peers address c's start inside the registration
    }
    EXPECT_EQ(a.rails, 2);
    EXPECT_EQ(a.owner, 0);
    EXPECT_EQ(a.bytes, buf.size());
    EXPECT_NE(a.id, b.id);
    EXPECT_TRUE(t.unexposeMemory(a).isOk());
    EXPECT_TRUE(t.unexposeMemory(b).isOk());
    EXPECT_TRUE(t.unexposeMemory(c).isOk());
    EXPECT_EQ(t.mrCacheStats(0).entries, 1u);  // unpinned, still cached
    EXPECT_EQ(t.exposeMemory(nullptr, 10, &a).code(), Code::InvalidArgument);
    EXPECT_EQ(t.exposeMemory(buf.data(), 0, &a).code(), Code::InvalidArgument);
  });
}

TEST(OfiRma, WritesSwitchedOffAreClearErrors) {
  runThreads(2, [](Options& o) { o.rma = "off"; }, [&](int rank, Transport& t, ThreadGroup&) {
    EXPECT_EQ(t.capabilities().rmaWrites, RmaVisibility::None);
    uint8_t b[8] = {};
    RemoteKey key;
    conflux::Status s = t.exposeMemory(b, sizeof b, &key);
    EXPECT_EQ(s.code(), Code::InvalidUsage);
    EXPECT_NE(s.message().find("tcp;ofi_rxm"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("CONFLUX_OFI_RMA=off"), std::string::npos) << s.message();
    key.magic = RemoteKey::kMagic;
    key.version = RemoteKey::kVersion;
    key.owner = 1 - rank;
    key.rails = 1;
    key.bytes = sizeof b;
    Request w = t.iwrite(1 - rank, b, 1, key, 0);
    EXPECT_EQ(t.wait(w).code(), Code::InvalidUsage);
    EXPECT_NE(w.status().message().find("write to rank"), std::string::npos) << w.status().message();
  });
}

TEST(OfiRma, ChoiceOfVisibilityMechanism) {
  using conflux::ofi::chooseRmaVisibility;
  // No FI_RMA: unavailable, naming the provider.
  auto none = chooseRmaVisibility("auto", "efa", false, false, false, 1);
  EXPECT_EQ(none.visibility, RmaVisibility::None);
  EXPECT_NE(none.unavailable.find("provider 'efa' does not offer FI_RMA"), std::string::npos) << none.unavailable;
  // Delivery complete wins in auto mode, on any number of rails.
  EXPECT_EQ(chooseRmaVisibility("auto", "p", true, true, true, 1).visibility, RmaVisibility::DeliveryComplete);
  EXPECT_EQ(chooseRmaVisibility("auto", "p", true, true, false, 4).visibility, RmaVisibility::DeliveryComplete);
  // Ordering alone works on one rail only.
  EXPECT_EQ(chooseRmaVisibility("auto", "p", true, false, true, 1).visibility, RmaVisibility::Ordered);
  auto twoRails = chooseRmaVisibility("auto", "p", true, false, true, 2);
  EXPECT_EQ(twoRails.visibility, RmaVisibility::None);
  EXPECT_NE(twoRails.unavailable.find("2 rails"), std::string::npos) << twoRails.unavailable;
  auto neither = chooseRmaVisibility("auto", "p", true, false, false, 1);
  EXPECT_EQ(neither.visibility, RmaVisibility::None);
  EXPECT_NE(neither.unavailable.find("neither FI_DELIVERY_COMPLETE nor FI_ORDER_SAW"), std::string::npos);
  // Forced modes.
  EXPECT_EQ(chooseRmaVisibility("order", "p", true, true, true, 1).visibility, RmaVisibility::Ordered);
  EXPECT_EQ(chooseRmaVisibility("order", "p", true, true, true, 2).visibility, RmaVisibility::None);
  EXPECT_EQ(chooseRmaVisibility("delivery", "p", true, false, true, 1).visibility, RmaVisibility::None);
  EXPECT_EQ(chooseRmaVisibility("off", "p", true, true, true, 1).visibility, RmaVisibility::None);
  EXPECT_THROW(chooseRmaVisibility("sometimes", "p", true, true, true, 1), conflux::Error);
}

}  // namespace
