// The net plugin driven from several threads at once, as NCCL drives it when one process serves several
// GPUs (one proxy thread each) through one plugin instance: in a receiver and a sender process, four
// threads each open their own connection (listen/accept, connect), register their own buffers and move
// a stream of messages of mixed sizes with several in flight, every byte checked; then they close
// concurrently. Run under ThreadSanitizer by the tsan preset (tools/run-tsan.sh).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net_test_util.h"

namespace conflux::plugintest {
namespace {

namespace abi = conflux::plugin::abi;
using conflux::plugin::NetApi;
using Clock = std::chrono::steady_clock;

constexpr int kThreads = 4;
constexpr int kMessages = 120;
constexpr int kWindow = 4;  // messages in flight per thread
constexpr size_t kSizes[] = {1, 100, 4096, 65537, 262144, 7};
constexpr size_t kMaxBytes = 262144;

size_t sizeOf(int m) { return kSizes[size_t(m) % (sizeof kSizes / sizeof kSizes[0])]; }
uint8_t byteAt(size_t i, int thread, int m) { return uint8_t(i * 31 + size_t(thread) * 17 + size_t(m) * 101 + (i >> 8)); }

/// Runs body(t) on kThreads threads; the first failure of any (a PT_CHECK) is thrown again here.
template <class Body>
void onThreads(Body&& body) {
  std::mutex m;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        body(t);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& th : threads) th.join();
  if (first) std::rethrow_exception(first);
}

std::unique_ptr<NetApi> openNet() {
  auto net = conflux::plugin::loadNet(CONFLUX_PLUGIN_PATH, 11);
  PT_CHECK(net->init(countingLogger) == 0);
  int n = 0;
  PT_CHECK(net->devices(&n) == 0 && n >= 1, "%d devices", n);
  return net;
}

void receiver(Channel& ch) {
  auto net = openNet();
  std::vector<void*> listens(kThreads, nullptr);
  for (int t = 0; t < kThreads; ++t) {
    uint8_t handle[abi::kHandleBytes];
    PT_CHECK(net->listen(0, handle, &listens[size_t(t)]) == 0 && listens[size_t(t)] != nullptr);
    ch.send(handle, sizeof handle);
  }
  onThreads([&](int t) {
    void* rc = nullptr;
    const auto until = Clock::now() + kPollLimit;
    while (rc == nullptr) {
      PT_CHECK(net->accept(listens[size_t(t)], &rc) == 0);
      PT_CHECK(rc != nullptr || Clock::now() < until, "thread %d: accept did not finish within 30 s", t);
    }
    std::vector<uint8_t> buf(kWindow * kMaxBytes);
    void* mh = nullptr;
    PT_CHECK(net->regMr(rc, buf.data(), buf.size(), abi::kPtrHost, &mh) == 0 && mh != nullptr);
    std::vector<void*> reqs(kWindow, nullptr);
    auto post = [&](int m) {
      void* data = buf.data() + size_t(m % kWindow) * kMaxBytes;
      size_t cap = kMaxBytes;
      int tag = m;
      reqs[size_t(m % kWindow)] = postUntil([&](void** r) { return net->irecv(rc, 1, &data, &cap, &tag, &mh, r); });
    };
    for (int m = 0; m < kWindow; ++m) post(m);
    for (int m = 0; m < kMessages; ++m) {
      int got = -1;
      waitDone(*net, reqs[size_t(m % kWindow)], &got);
      PT_CHECK(size_t(got) == sizeOf(m), "thread %d message %d: %d bytes, want %zu", t, m, got, sizeOf(m));
      const uint8_t* p = buf.data() + size_t(m % kWindow) * kMaxBytes;
      for (size_t i = 0; i < sizeOf(m); ++i) {
        PT_CHECK(p[i] == byteAt(i, t, m), "thread %d message %d: byte %zu", t, m, i);
      }
      if (m + kWindow < kMessages) post(m + kWindow);
    }
    PT_CHECK(net->deregMr(rc, mh) == 0);
    PT_CHECK(net->closeRecv(rc) == 0);
    PT_CHECK(net->closeListen(listens[size_t(t)]) == 0);
  });
  ch.barrier();
  PT_CHECK(net->finalize() == 0);
  PT_CHECK(warnings == 0, "%d warnings logged", warnings.load());
}

void sender(Channel& ch) {
  auto net = openNet();
  std::vector<std::vector<uint8_t>> handles(kThreads, std::vector<uint8_t>(abi::kHandleBytes));
  for (auto& h : handles) ch.recv(h.data(), h.size());
  onThreads([&](int t) {
    void* sc = nullptr;
    const auto until = Clock::now() + kPollLimit;
    while (sc == nullptr) {
      PT_CHECK(net->connect(0, handles[size_t(t)].data(), &sc) == 0);
      PT_CHECK(sc != nullptr || Clock::now() < until, "thread %d: connect did not finish within 30 s", t);
    }
    std::vector<uint8_t> buf(kWindow * kMaxBytes);
    void* mh = nullptr;
    PT_CHECK(net->regMr(sc, buf.data(), buf.size(), abi::kPtrHost, &mh) == 0 && mh != nullptr);
    std::vector<void*> reqs(kWindow, nullptr);
    auto post = [&](int m) {
      uint8_t* p = buf.data() + size_t(m % kWindow) * kMaxBytes;
      for (size_t i = 0; i < sizeOf(m); ++i) p[i] = byteAt(i, t, m);
      reqs[size_t(m % kWindow)] = postUntil([&](void** r) { return net->isend(sc, p, sizeOf(m), m, mh, r); });
    };
    for (int m = 0; m < kWindow; ++m) post(m);
    for (int m = 0; m < kMessages; ++m) {
      waitDone(*net, reqs[size_t(m % kWindow)], nullptr);
      if (m + kWindow < kMessages) post(m + kWindow);
    }
    PT_CHECK(net->deregMr(sc, mh) == 0);
    PT_CHECK(net->closeSend(sc) == 0);
  });
  ch.barrier();
  PT_CHECK(net->finalize() == 0);
  PT_CHECK(warnings == 0, "%d warnings logged", warnings.load());
}

TEST(PluginNetThreads, FourProxyThreadsShareOnePluginInstance) {
  ::setenv("CONFLUX_OFI_DOMAINS", "lo", 1);
  const std::string failure = runPair([](Channel& ch) { receiver(ch); }, [](Channel& ch) { sender(ch); });
  EXPECT_EQ(failure, "");
}

}  // namespace
}  // namespace conflux::plugintest
