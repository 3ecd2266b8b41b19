// conflux::ofi::Transport between ranks that are threads of this process (tcp;ofi_rxm on 127.0.0.1):
// message sizes around every boundary, receives posted before and after sends, many messages in flight
// with out-of-order tags, source matching, chunking with tight flow control, and two rails.
#include <sys/resource.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "moved_bytes_watch.h"
#include "test_ofi_util.h"

namespace {

using namespace ofitest;
using conflux::Code;
using conflux::ofi::makeUserTag;

/// Sends one message of each size from rank 0 to rank 1 and checks it byte for byte.
void exchangeSizes(const std::vector<size_t>& sizes, const std::function<void(Options&)>& tweak = {}) {
  runThreads(2, tweak, [&](int rank, Transport& t, ThreadGroup&) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const size_t bytes = sizes[i];
      const uint64_t tag = makeUserTag(7, uint32_t(i));
      std::vector<uint8_t> buf(std::max<size_t>(bytes, 1));
      if (rank == 0) {
        fillPattern(buf, 0, uint32_t(i));
        Request r = t.isend(1, tag, buf.data(), bytes);
        conflux::Status s = t.wait(r);
        EXPECT_TRUE(s.isOk()) << bytes << " B: " << s.message();
      } else {
        Request r = t.irecv(0, tag, buf.data(), bytes);
        conflux::Status s = t.wait(r);
        EXPECT_TRUE(s.isOk()) << bytes << " B: " << s.message();
        EXPECT_EQ(firstMismatch(buf, bytes, 0, uint32_t(i)), -1) << "message of " << bytes << " bytes";
      }
    }
  });
}

TEST(OfiTransport, CapabilitiesOfTcpRxm) {
  runThreads(2, {}, [&](int, Transport& t, ThreadGroup&) {
    const auto& c = t.capabilities();
    EXPECT_EQ(c.provider, "tcp;ofi_rxm");
    EXPECT_GT(c.injectSize, 0u);
    EXPECT_GT(c.txSize, 0u);
    EXPECT_GT(c.rxSize, 0u);
    EXPECT_EQ(c.rails, 1);
    EXPECT_FALSE(c.localMrRequired);  // tcp;ofi_rxm needs no registration (mr_mode 0)
    EXPECT_GE(c.apiVersion, 1u << 16);  // FI_VERSION(1, 0)
  });
}

TEST(OfiTransport, SmallSizesAroundInjectLimit) {
  size_t inject = 0;
  runThreads(1, {}, [&](int, Transport& t, ThreadGroup&) { inject = t.capabilities().injectSize; });
  ASSERT_GT(inject, 1u);
  exchangeSizes({0, 1, 8, inject - 1, inject, inject + 1, 4096});
}

TEST(OfiTransport, LargeSizesByteForByte) {
  exchangeSizes({size_t(64) << 10, (size_t(1) << 20) + 7, size_t(64) << 20});
}

TEST(OfiTransport, TightFlowControlManySmallChunks) {
  // 4 KiB chunks, 2 in flight: a 1 MiB+7 message is 257 chunks through a 2-deep window.
  exchangeSizes({(size_t(1) << 20) + 7, 3 * 4096},
                [](Options& o) {
                  o.chunkBytes = 4096;
                  o.inflight = 2;
                });
}

TEST(OfiTransport, ChunkSizeGrowsForHugeChunkCounts) {
  // 256-byte chunks would need 32768 chunks for 8 MiB: the chunk grows to stay within 4096 chunks.
  exchangeSizes({(size_t(8) << 20) + 3}, [](Options& o) { o.chunkBytes = 256; });
}

TEST(OfiTransport, ReceivePostedBeforeAndAfterSend) {
  const size_t sizes[] = {8, size_t(1) << 20};
  runThreads(2, {}, [&](int rank, Transport& t, ThreadGroup& g) {
    for (size_t bytes : sizes) {
      std::vector<uint8_t> buf(bytes);
      // Before: rank 1 posts, then rank 0 sends.
      if (rank == 1) {
        Request r = t.irecv(0, 1, buf.data(), bytes);
        g.barrier();
        EXPECT_TRUE(t.wait(r).isOk());
        EXPECT_EQ(firstMismatch(buf, bytes, 0, 1), -1);
      } else {
        g.barrier();
        fillPattern(buf, 0, 1);
        Request s = t.isend(1, 1, buf.data(), bytes);
        EXPECT_TRUE(t.wait(s).isOk());
      }
      g.barrier();
      // After: rank 0 sends and progresses a while before rank 1 posts its receive.
      if (rank == 0) {
        fillPattern(buf, 0, 2);
        Request s = t.isend(1, 2, buf.data(), bytes);
        for (int i = 0; i < 50; ++i) {
          t.progress();
          std::this_thread::sleep_for(1ms);
        }
        g.barrier();
        EXPECT_TRUE(t.wait(s).isOk());
      } else {
        g.barrier();
        Request r = t.irecv(0, 2, buf.data(), bytes);
        EXPECT_TRUE(t.wait(r).isOk());
        EXPECT_EQ(firstMismatch(buf, bytes, 0, 2), -1);
      }
      g.barrier();
    }
  });
}

TEST(OfiTransport, ManyMessagesInFlightOutOfOrderTags) {
  constexpr int kMessages = 96;
  std::vector<size_t> sizes(kMessages);
  for (int i = 0; i < kMessages; ++i) sizes[size_t(i)] = (i % 7 == 0) ? size_t(300000 + i) : size_t(i * 97 % 5000);
  runThreads(2, [](Options& o) { o.chunkBytes = 65536; }, [&](int rank, Transport& t, ThreadGroup&) {
    std::vector<std::vector<uint8_t>> bufs(kMessages);
    std::vector<int> order(kMessages);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937 rng(rank == 0 ? 1 : 2);
    std::shuffle(order.begin(), order.end(), rng);  // each side posts in its own random order
    std::vector<Request> reqs;
    for (int i : order) {
      bufs[size_t(i)].resize(std::max<size_t>(sizes[size_t(i)], 1));
      const uint64_t tag = makeUserTag(3, uint32_t(i));
      if (rank == 0) {
        fillPattern(bufs[size_t(i)], 0, uint32_t(i));
        reqs.push_back(t.isend(1, tag, bufs[size_t(i)].data(), sizes[size_t(i)]));
      } else {
        reqs.push_back(t.irecv(0, tag, bufs[size_t(i)].data(), sizes[size_t(i)]));
      }
    }
    conflux::Status s = t.wait(reqs);
    ASSERT_TRUE(s.isOk()) << s.message();
    if (rank == 1) {
      for (int i = 0; i < kMessages; ++i)
        EXPECT_EQ(firstMismatch(bufs[size_t(i)], sizes[size_t(i)], 0, uint32_t(i)), -1) << "message " << i;
    }
  });
}

// A message of many chunks shows its bytes moving, chunk by chunk, before it completes (the executor
// counts that as progress, so a slow link is not a stuck peer), and all of them once it has.
TEST(OfiTransport, AMessageOfManyChunksShowsItsBytesMoving) {
  constexpr size_t kBytes = (size_t{16} << 20) + 5;
  runThreads(2, [](Options& o) {
    o.chunkBytes = 65536;
    o.inflight = 2;
  }, [&](int rank, Transport& t, ThreadGroup&) {
    std::vector<uint8_t> buf(kBytes);
    if (rank == 0) fillPattern(buf, 0, 9);
    Request r = rank == 0 ? t.isend(1, makeUserTag(4, 9), buf.data(), kBytes) : t.irecv(0, makeUserTag(4, 9), buf.data(), kBytes);
    const bool sawPart = conflux::testing::sawBytesMoving(r, kBytes, [&] { t.progress(); });
    ASSERT_TRUE(r.done());
    ASSERT_TRUE(r.status().isOk()) << r.status().message();
    EXPECT_TRUE(sawPart) << "rank " << rank << " saw the message only whole";
    EXPECT_EQ(r.movedBytes(), kBytes);
    if (rank == 1) {
      EXPECT_EQ(firstMismatch(buf, kBytes, 0, 9), -1);
    }
  });
}

TEST(OfiTransport, EqualTagsMatchInPostOrder) {
  constexpr int kMessages = 12;
  runThreads(2, [](Options& o) { o.chunkBytes = 8192; }, [&](int rank, Transport& t, ThreadGroup&) {
    std::vector<std::vector<uint8_t>> bufs(kMessages, std::vector<uint8_t>(50000));
    std::vector<Request> reqs;
    for (int i = 0; i < kMessages; ++i) {
      if (rank == 0) {
        fillPattern(bufs[size_t(i)], 0, uint32_t(100 + i));
        reqs.push_back(t.isend(1, 5, bufs[size_t(i)].data(), 50000));
      } else {
        reqs.push_back(t.irecv(0, 5, bufs[size_t(i)].data(), 50000));
      }
    }
    ASSERT_TRUE(t.wait(reqs).isOk());
    if (rank == 1) {
      for (int i = 0; i < kMessages; ++i)
        EXPECT_EQ(firstMismatch(bufs[size_t(i)], 50000, 0, uint32_t(100 + i)), -1) << "message " << i;
    }
  });
}

TEST(OfiTransport, ReceivesMatchBySource) {
  // Ranks 0 and 1 both send to rank 2 with the same user tag; each receive must get its source's bytes.
  constexpr size_t kBytes = 200000;
  runThreads(3, [](Options& o) { o.chunkBytes = 32768; }, [&](int rank, Transport& t, ThreadGroup&) {
    if (rank < 2) {
      std::vector<uint8_t> buf(kBytes);
      fillPattern(buf, rank, 9);
      Request s = t.isend(2, 42, buf.data(), kBytes);
      EXPECT_TRUE(t.wait(s).isOk());
    } else {
      std::vector<uint8_t> from1(kBytes), from0(kBytes);
      std::vector<Request> reqs = {t.irecv(1, 42, from1.data(), kBytes), t.irecv(0, 42, from0.data(), kBytes)};
      ASSERT_TRUE(t.wait(reqs).isOk());
      EXPECT_EQ(firstMismatch(from0, kBytes, 0, 9), -1);
      EXPECT_EQ(firstMismatch(from1, kBytes, 1, 9), -1);
    }
  });
}

TEST(OfiTransport, SendToSelf) {
  runThreads(1, {}, [&](int, Transport& t, ThreadGroup&) {
    std::vector<uint8_t> a(100000), b(100000);
    fillPattern(a, 0, 4);
    std::vector<Request> reqs = {t.irecv(0, 1, b.data(), b.size()), t.isend(0, 1, a.data(), a.size())};
    ASSERT_TRUE(t.wait(reqs).isOk());
    EXPECT_EQ(firstMismatch(b, b.size(), 0, 4), -1);
  });
}

TEST(OfiTransport, TwoRailsStripeLargeMessages) {
  const std::vector<size_t> sizes = {1, (size_t(8) << 20) + 3, 3 * 65536};
  runThreads(2, [](Options& o) {
    o.rails = 2;
    o.chunkBytes = 65536;
  }, [&](int rank, Transport& t, ThreadGroup&) {
    EXPECT_EQ(t.rails(), 2);
    EXPECT_EQ(t.capabilities().rails, 2);
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::vector<uint8_t> buf(sizes[i]);
      if (rank == 0) {
        fillPattern(buf, 0, uint32_t(i));
        Request s = t.isend(1, makeUserTag(1, uint32_t(i)), buf.data(), sizes[i]);
        EXPECT_TRUE(t.wait(s).isOk());
      } else {
        Request r = t.irecv(0, makeUserTag(1, uint32_t(i)), buf.data(), sizes[i]);
        EXPECT_TRUE(t.wait(r).isOk());
        EXPECT_EQ(firstMismatch(buf, sizes[i], 0, uint32_t(i)), -1) << sizes[i] << " bytes over 2 rails";
      }
    }
  });
}

TEST(OfiTransport, InvalidArgumentsFailTheRequest) {
  runThreads(1, {}, [&](int, Transport& t, ThreadGroup&) {
    uint8_t b = 0;
    Request r = t.isend(5, 1, &b, 1);
    EXPECT_TRUE(r.done());
    EXPECT_EQ(r.status().code(), Code::InvalidArgument);
    Request r2 = t.irecv(0, conflux::ofi::kMaxUserTag + 1, &b, 1);
    EXPECT_EQ(t.wait(r2).code(), Code::InvalidArgument);
  });
}

TEST(OfiTransport, SizeMismatchIsAnError) {
  runThreads(2, {}, [&](int rank, Transport& t, ThreadGroup&) {
    std::vector<uint8_t> buf(200);
    if (rank == 0) {
      Request s = t.isend(1, 3, buf.data(), 100);
      EXPECT_TRUE(t.wait(s).isOk());
    } else {
      Request r = t.irecv(0, 3, buf.data(), 200);
      conflux::Status st = t.wait(r, conflux::ofi::Clock::now() + 10s);
      EXPECT_EQ(st.code(), Code::InvalidUsage) << st.message();
      EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
    }
  });
}

TEST(OfiTransport, PeerThatNeverSendsTimesOutNamingIt) {
  runThreads(2, {}, [&](int rank, Transport& t, ThreadGroup& g) {
    if (rank == 0) {
      std::vector<uint8_t> buf(4096);
      Request r = t.irecv(1, 77, buf.data(), buf.size());
      const auto t0 = std::chrono::steady_clock::now();
      conflux::Status s = t.wait(r, conflux::ofi::Clock::now() + 400ms);
      const auto waited = std::chrono::steady_clock::now() - t0;
      EXPECT_EQ(s.code(), Code::Timeout) << s.message();
      EXPECT_NE(s.message().find("recv from rank 1"), std::string::npos) << s.message();
      EXPECT_GE(waited, 390ms);
      EXPECT_LT(waited, 2000ms);
    }
    g.barrier();
  });
}

TEST(OfiTransport, BlockedWaitDoesNotBurnACore) {
  runThreads(2, [](Options& o) { o.spinUs = 50; }, [&](int rank, Transport& t, ThreadGroup& g) {
    if (rank == 0) {
      rusage before{}, after{};
      ::getrusage(RUSAGE_THREAD, &before);
      uint8_t b = 0;
      Request r = t.irecv(1, 1, &b, 1);
      conflux::Status s = t.wait(r, conflux::ofi::Clock::now() + 500ms);
      ::getrusage(RUSAGE_THREAD, &after);
      EXPECT_EQ(s.code(), Code::Timeout);
      auto us = [](const timeval& tv) { return double(tv.tv_sec) * 1e6 + double(tv.tv_usec); };
      const double cpuUs = us(after.ru_utime) - us(before.ru_utime) + us(after.ru_stime) - us(before.ru_stime);
      EXPECT_LT(cpuUs, 150000.0) << "a 500 ms wait used " << cpuUs << " us of CPU";
      g.barrier();
      // The receive is still posted: let it finish so the transport closes cleanly.
      EXPECT_TRUE(t.wait(r).isOk());
    } else {
      g.barrier();
      uint8_t b = 1;
      Request s = t.isend(0, 1, &b, 1);
      EXPECT_TRUE(t.wait(s).isOk());
    }
  });
}

}  // namespace

TEST(OfiTransport, NamedDomainsOpenOneRailEach) {
  // "lo" twice: two rails on the loopback domain, each with the domain's own address (no bind address).
  runThreads(2, [](Options& o) {
    o.domains = {"lo", "lo"};
    o.localAddress.clear();
    o.chunkBytes = 65536;
  }, [&](int rank, Transport& t, ThreadGroup&) {
    EXPECT_EQ(t.rails(), 2);
    EXPECT_EQ(t.capabilities().railDomains, (std::vector<std::string>{"lo", "lo"}));
    const size_t bytes = (size_t(1) << 20) + 5;
    std::vector<uint8_t> buf(bytes);
    if (rank == 0) {
      fillPattern(buf, 0, 9);
      Request s = t.isend(1, makeUserTag(1, 9), buf.data(), bytes);
      EXPECT_TRUE(t.wait(s).isOk());
    } else {
      Request r = t.irecv(0, makeUserTag(1, 9), buf.data(), bytes);
      EXPECT_TRUE(t.wait(r).isOk());
      EXPECT_EQ(firstMismatch(buf, bytes, 0, 9), -1);
    }
  });
}

TEST(OfiTransport, UnknownDomainIsAnErrorListingTheOffered) {
  Options o = loopbackOptions(0, 1);
  o.domains = {"lo", "nosuchnic7"};
  try {
    Transport::create(o, [](const std::vector<uint8_t>& v) { return v; });
    FAIL() << "a domain the provider does not offer was accepted";
  } catch (const conflux::Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    const std::string what = e.what();
    EXPECT_NE(what.find("'nosuchnic7'"), std::string::npos) << what;
    EXPECT_NE(what.find("offers: "), std::string::npos) << what;
    EXPECT_NE(what.find("lo"), std::string::npos) << what;
  }
}
