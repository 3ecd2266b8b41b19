// Striped messages (plugin/net_data.cc) on a virtual device of every member, one connection, through the
// plugin's exports only (ABI v9..v11), with a receiver and a sender process:
//   sizes      around CONFLUX_PLUGIN_STRIPE_BYTES and far above it, odd ones, and receive buffers larger
//              than the message (the receiver reports the sent size), each checked byte for byte;
//   window     16 striped messages with one tag in flight at once: each lands in its own receive, in order;
//   overlap    16 more whose receives all share one buffer, as a benchmark's do: each reports its size
//              (nothing the plugin needs travels in the buffer, so overwritten bytes cannot confuse it);
//   grouped    one irecv of three buffers with different tags, a whole message and two striped ones,
//              sent in the reverse order;
//   unexpected four messages of one tag (16 MiB, 256 KiB, a whole one, 1 MiB + 5) sent before their
//              receives are posted: leads of different sizes and protocols, stripes in message order;
//   after an error  a whole message too large for its receive, then a striped one with the same tag;
//   too large  a striped message larger than the receive buffer: an error on the receiver, the sender's
//              request still completes, and the connection carries the next message;
//   overlapping virtual devices {0,1} and {2,1} on three loopback devices, one connection each, striped
//              messages with one tag on both at once: each lands where it belongs (comm ids must be unique
//              on the shared rail, not only on each connection's first one);
//   rails      the sender's per-rail byte counters (its metrics file) show each rail carried its share;
//              with CONFLUX_PLUGIN_STRIPE_BYTES=0 the second rail carries nothing.
// Between namespaces with two rails (tests/netns/test_plugin_netns.py) the script also checks the links.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "net_test_util.h"
#include "tests/common/metrics_http.h"

namespace conflux::plugintest {
namespace {

namespace abi = conflux::plugin::abi;
using conflux::plugin::loadNet;
using conflux::plugin::NetApi;

using Clock = std::chrono::steady_clock;
constexpr size_t kBufferBytes = size_t{16} << 20;
constexpr size_t kWindowBytes = size_t{1} << 20;
constexpr int kWindow = 16;

// The unexpected phase: sizes, and where each lands (inside the buffer's 32 MiB).
constexpr size_t kUnexpected[4] = {size_t{16} << 20, size_t{256} << 10, 100, (size_t{1} << 20) + 5};
constexpr size_t kUnexpectedAt[4] = {0, size_t{16} << 20, size_t{17} << 20, size_t{18} << 20};
constexpr size_t kUnexpectedCap[4] = {size_t{16} << 20, size_t{1} << 20, size_t{1} << 20, size_t{2} << 20};

struct Case {
  size_t sent, capacity;
};

/// Sizes around the stripe threshold t (0: striping off, default sizes).
std::vector<Case> casesFor(size_t t) {
  if (t == 0) t = 131072;
  std::vector<Case> out = {{t - 1, t - 1},     {t, t},           {t + 1, size_t{4} << 20},
                           {(size_t{1} << 20) + 7, (size_t{1} << 20) + 7}, {size_t{4} << 20, kBufferBytes},
                           {kBufferBytes, kBufferBytes}};
  if (t <= 64) {  // tiny thresholds: stripes of a few bytes, and an empty last stripe
    for (size_t s : {size_t{16}, size_t{63}, size_t{64}, size_t{65}, size_t{129}}) out.push_back({s, s + 100});
  }
  return out;
}

uint8_t pattern(size_t i, size_t seed) { return uint8_t(i * 131 + seed * 29 + (i >> 11)); }

void fillPattern(uint8_t* p, size_t n, size_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = pattern(i, seed);
}

void verify(const uint8_t* p, size_t n, size_t seed, const char* what) {
  for (size_t i = 0; i < n; ++i) {
    PT_CHECK(p[i] == pattern(i, seed), "%s (seed %zu): byte %zu of %zu is %u, want %u", what, seed, i, n, p[i],
             pattern(i, seed));
  }
}

size_t stripeThreshold() {
  const char* v = std::getenv("CONFLUX_PLUGIN_STRIPE_BYTES");
  return v != nullptr ? size_t(std::strtoull(v, nullptr, 10)) : 131072;
}

/// The after-an-error phase needs its 100000-byte message whole (below the threshold, or striping off).
/// Striped and cut by a small receive, its sender's request did not always complete under load (tcp;ofi_rxm,
/// a tiny threshold): a limit of the error path, documented in docs/plugin.md.
bool wholeTooLarge() { return stripeThreshold() == 0 || stripeThreshold() > 100000; }

struct Side {
  std::unique_ptr<NetApi> net;
  int vdev = -1;
  int members = 0;
  std::vector<uint8_t> buf = std::vector<uint8_t>(kBufferBytes + kWindow * kWindowBytes);
  void* mh = nullptr;
};

Side open(int version) {
  Side s;
  s.net = loadNet(CONFLUX_PLUGIN_PATH, version);
  PT_CHECK(s.net->init(countingLogger) == 0);
  int physical = 0;
  PT_CHECK(s.net->devices(&physical) == 0 && physical >= 2, "%d devices (the test needs two)", physical);
  s.members = std::min(physical, abi::kMaxVDevs);
  abi::VProps group{s.members, {}};
  for (int i = 0; i < s.members; ++i) group.devs[i] = i;
  PT_CHECK(s.net->makeVDevice(&s.vdev, &group) == 0);
  return s;
}

void* recvOne(NetApi& net, void* comm, void* data, size_t cap, int tag, void* mh) {
  return postUntil([&](void** r) { return net.irecv(comm, 1, &data, &cap, &tag, &mh, r); });
}

void* sendOne(NetApi& net, void* comm, void* data, size_t size, int tag, void* mh) {
  return postUntil([&](void** r) { return net.isend(comm, data, size, tag, mh, r); });
}

/// Polls test() until done; returns its result (0, or the error of a failed request).
int resultOf(NetApi& net, void* req) {
  const auto until = Clock::now() + kPollLimit;
  int done = 0, size = -1;
  for (;;) {
    const int rc = net.test(req, &done, &size);
    if (rc != 0 || done) return rc;
    PT_CHECK(Clock::now() < until, "request not done within 30 s (phase: %s)", phase);
  }
}

void receiver(int version, Channel& ch) {
  Side s = open(version);
  NetApi& net = *s.net;
  uint8_t handle[abi::kHandleBytes];
  void* lc = nullptr;
  PT_CHECK(net.listen(s.vdev, handle, &lc) == 0 && lc != nullptr);
  ch.send(handle, sizeof handle);
  void* c = nullptr;
  const auto until = Clock::now() + kPollLimit;
  while (c == nullptr) {
    PT_CHECK(net.accept(lc, &c) == 0);
    PT_CHECK(c != nullptr || Clock::now() < until, "accept did not finish within 30 s");
  }
  PT_CHECK(net.regMr(c, s.buf.data(), s.buf.size(), abi::kPtrHost, &s.mh) == 0);
  uint8_t* buf = s.buf.data();

  phase = "sizes";
  size_t seed = 0;
  for (const Case& k : casesFor(stripeThreshold())) {
    std::memset(buf, 0xee, k.capacity);
    int got = -1;
    waitDone(net, recvOne(net, c, buf, k.capacity, 7, s.mh), &got);
    PT_CHECK(size_t(got) == k.sent, "received %d bytes of %zu sent into %zu", got, k.sent, k.capacity);
    verify(buf, k.sent, seed++, "sizes");
    PT_CHECK(k.sent == k.capacity || buf[k.sent] == 0xee, "a byte past the message changed");
  }

  phase = "window";
  std::vector<void*> reqs;
  for (int k = 0; k < kWindow; ++k) reqs.push_back(recvOne(net, c, buf + size_t(k) * kWindowBytes, kWindowBytes, 8, s.mh));
  ch.barrier();  // all posted before the sender starts
  for (int k = 0; k < kWindow; ++k) {
    int got = -1;
    waitDone(net, reqs[size_t(k)], &got);
    PT_CHECK(size_t(got) == kWindowBytes, "window message %d: %d bytes", k, got);
    verify(buf + size_t(k) * kWindowBytes, kWindowBytes, 100 + size_t(k), "window");
  }

  phase = "overlap";
  reqs.clear();
  for (int k = 0; k < kWindow; ++k) reqs.push_back(recvOne(net, c, buf, kWindowBytes, 8, s.mh));
  ch.barrier();
  for (int k = 0; k < kWindow; ++k) {
    int got = -1;
    waitDone(net, reqs[size_t(k)], &got);
    PT_CHECK(size_t(got) == kWindowBytes - size_t(k), "overlapping receive %d: %d bytes", k, got);
  }

  phase = "grouped";
  {
    const size_t cap[3] = {4096, size_t{1} << 20, size_t{1} << 20};
    const size_t sent[3] = {8, size_t{512} << 10, (size_t{256} << 10) + 3};
    void* data[3] = {buf, buf + (size_t{1} << 20), buf + (size_t{2} << 20)};
    size_t sizes[3] = {cap[0], cap[1], cap[2]};
    int tags[3] = {10, 11, 12};
    void* mhs[3] = {s.mh, s.mh, s.mh};
    void* r = postUntil([&](void** req) { return net.irecv(c, 3, data, sizes, tags, mhs, req); });
    int got[3] = {-1, -1, -1};
    waitDone(net, r, got);
    for (int i = 0; i < 3; ++i) {
      PT_CHECK(size_t(got[i]) == sent[i], "grouped buffer %d: %d bytes, want %zu", i, got[i], sent[i]);
      verify(static_cast<uint8_t*>(data[i]), sent[i], 200 + size_t(i), "grouped");
    }
  }

  phase = "unexpected";
  ch.barrier();  // the sender posted its four sends
  {
    std::vector<void*> rs;
    for (int k = 0; k < 4; ++k) rs.push_back(recvOne(net, c, buf + kUnexpectedAt[k], kUnexpectedCap[k], 20, s.mh));
    for (int k = 0; k < 4; ++k) {
      int got = -1;
      waitDone(net, rs[size_t(k)], &got);
      PT_CHECK(size_t(got) == kUnexpected[k], "unexpected message %d: %d bytes, want %zu", k, got, kUnexpected[k]);
      verify(buf + kUnexpectedAt[k], kUnexpected[k], 400 + size_t(k), "unexpected");
    }
  }

  phase = "after an error";
  if (wholeTooLarge()) {
    void* small = recvOne(net, c, buf, size_t{64} << 10, 21, s.mh);
    void* next = recvOne(net, c, buf + (size_t{1} << 20), size_t{1} << 20, 21, s.mh);
    int got = -1;
    waitDone(net, next, &got);  // before the failed one is tested: its failure alone must not hold this up
    PT_CHECK(size_t(got) == (size_t{512} << 10), "after the failure: %d bytes", got);
    PT_CHECK(resultOf(net, small) != 0, "a 100 KB message into a 64 KiB buffer did not fail");
    verify(buf + (size_t{1} << 20), size_t{512} << 10, 500, "after the failure");
    PT_CHECK(warnings > 0, "the failure logged no warning");
    warnings = 0;
  }

  phase = "too large";
  if (stripeThreshold() != 0) {
    PT_CHECK(resultOf(net, recvOne(net, c, buf, size_t{1} << 20, 9, s.mh)) != 0,
             "a 2 MiB striped message into a 1 MiB buffer did not fail");
    PT_CHECK(warnings > 0, "the failure logged no warning");
    warnings = 0;
    int got = -1;
    waitDone(net, recvOne(net, c, buf, size_t{1} << 20, 9, s.mh), &got);  // the connection goes on
    PT_CHECK(got == 12345, "after the failure: %d bytes", got);
    verify(buf, 12345, 300, "after the failure");
  }
  ch.barrier();
  PT_CHECK(net.deregMr(c, s.mh) == 0);
  PT_CHECK(net.closeRecv(c) == 0);
  PT_CHECK(net.closeListen(lc) == 0);
  PT_CHECK(net.finalize() == 0);
  PT_CHECK(warnings == 0, "%d warnings logged", warnings.load());
}

/// The sender's bytes per rail, from its metrics file (rail label = physical device index).
std::vector<double> sentPerRail(int members) {
  std::vector<double> out(size_t(members), -1);
  const auto text = metricstest::fileText(std::getenv("CONFLUX_METRICS_FILE"));
  if (!text) return out;
  for (const auto& [key, v] : metricstest::samples(*text)) {
    if (key.rfind("conflux_nic_sent_bytes_total{", 0) != 0) continue;
    for (int m = 0; m < members; ++m) {
      if (key.find("rail=\"" + std::to_string(m) + "\"") != std::string::npos) out[size_t(m)] = v;
    }
  }
  return out;
}

void sender(int version, Channel& ch) {
  Side s = open(version);
  NetApi& net = *s.net;
  uint8_t handle[abi::kHandleBytes];
  ch.recv(handle, sizeof handle);
  void* c = nullptr;
  const auto until = Clock::now() + kPollLimit;
  while (c == nullptr) {
    PT_CHECK(net.connect(s.vdev, handle, &c) == 0);
    PT_CHECK(c != nullptr || Clock::now() < until, "connect did not finish within 30 s");
  }
  PT_CHECK(net.regMr(c, s.buf.data(), s.buf.size(), abi::kPtrHost, &s.mh) == 0);
  uint8_t* buf = s.buf.data();
  const size_t threshold = stripeThreshold();
  double striped = 0, whole = 0;  // bytes sent each way
  auto count = [&](size_t n) { (threshold != 0 && n >= threshold ? striped : whole) += double(n); };

  phase = "sizes";
  size_t seed = 0;
  for (const Case& k : casesFor(threshold)) {
    fillPattern(buf, k.sent, seed++);
    waitDone(net, sendOne(net, c, buf, k.sent, 7, s.mh), nullptr);
    count(k.sent);
  }

  phase = "window";
  for (int k = 0; k < kWindow; ++k) fillPattern(buf + size_t(k) * kWindowBytes, kWindowBytes, 100 + size_t(k));
  ch.barrier();
  std::vector<void*> reqs;
  for (int k = 0; k < kWindow; ++k) {
    reqs.push_back(sendOne(net, c, buf + size_t(k) * kWindowBytes, kWindowBytes, 8, s.mh));
    count(kWindowBytes);
  }
  for (void* r : reqs) waitDone(net, r, nullptr);

  phase = "overlap";
  ch.barrier();
  reqs.clear();
  for (int k = 0; k < kWindow; ++k) {
    reqs.push_back(sendOne(net, c, buf + size_t(k) * kWindowBytes, kWindowBytes - size_t(k), 8, s.mh));
    count(kWindowBytes - size_t(k));
  }
  for (void* r : reqs) waitDone(net, r, nullptr);

  phase = "grouped";
  {
    const size_t sent[3] = {8, size_t{512} << 10, (size_t{256} << 10) + 3};
    uint8_t* data[3] = {buf, buf + (size_t{1} << 20), buf + (size_t{2} << 20)};
    for (int i = 0; i < 3; ++i) fillPattern(data[i], sent[i], 200 + size_t(i));
    for (int i = 2; i >= 0; --i) {
      waitDone(net, sendOne(net, c, data[i], sent[i], 10 + i, s.mh), nullptr);
      count(sent[i]);
    }
  }

  phase = "unexpected";
  {
    std::vector<void*> ss;
    for (int k = 0; k < 4; ++k) {
      fillPattern(buf + kUnexpectedAt[k], kUnexpected[k], 400 + size_t(k));
      ss.push_back(sendOne(net, c, buf + kUnexpectedAt[k], kUnexpected[k], 20, s.mh));
      count(kUnexpected[k]);
    }
    ch.barrier();
    for (void* r : ss) waitDone(net, r, nullptr);
  }

  phase = "after an error";
  if (wholeTooLarge()) {
    fillPattern(buf, 100000, 0);
    PT_CHECK(resultOf(net, sendOne(net, c, buf, 100000, 21, s.mh)) == 0, "the send too large for its receive failed");
    count(100000);
    fillPattern(buf, size_t{512} << 10, 500);
    waitDone(net, sendOne(net, c, buf, size_t{512} << 10, 21, s.mh), nullptr);
    count(size_t{512} << 10);
  }

  phase = "too large";
  if (threshold != 0) {
    fillPattern(buf, size_t{2} << 20, 0);
    const int rc = resultOf(net, sendOne(net, c, buf, size_t{2} << 20, 9, s.mh));
    PT_CHECK(rc == 0, "the send of a message too large for its receive failed on the sender (%d)", rc);
    fillPattern(buf, 12345, 300);
    waitDone(net, sendOne(net, c, buf, 12345, 9, s.mh), nullptr);
  }
  ch.barrier();

  phase = "rails";
  // The metrics file is rewritten every CONFLUX_METRICS_INTERVAL_MS: wait for the final counts.
  const double all = striped + whole + (threshold != 0 ? double((size_t{2} << 20) + 12345) : 0.0);
  std::vector<double> perRail;
  for (int i = 0; i < 100; ++i) {
    perRail = sentPerRail(s.members);
    double sum = 0;
    for (double v : perRail) sum += v;
    if (sum >= all) break;
    usleep(50000);
  }
  for (int m = 0; m < s.members; ++m) {
    const double want = threshold == 0 ? (m == 0 ? all : 0.0) : striped / s.members;
    const double got = perRail[size_t(m)];
    PT_CHECK(threshold == 0 ? got == want : got >= 0.9 * want,
             "rail %d sent %.0f bytes, want %s%.0f (striped %.0f, whole %.0f)", m, got,
             threshold == 0 ? "" : "at least 0.9 x ", want, striped, whole);
  }
  PT_CHECK(net.deregMr(c, s.mh) == 0);
  PT_CHECK(net.closeSend(c) == 0);
  PT_CHECK(net.finalize() == 0);
  PT_CHECK(warnings == 0, "%d warnings logged", warnings.load());
}

// Overlapping virtual devices: A = {0,1} and B = {2,1} share device 1, where both connections' second
// stripes arrive.
constexpr int kOverlapRounds = 4;
constexpr size_t kOverlapBytes = size_t{4} << 20;
/// Different sizes per device, so that a stripe taken by the other connection's receive cannot pass.
size_t overlapSize(int d) { return d == 0 ? kOverlapBytes : kOverlapBytes - (size_t{1} << 20) + 7; }

std::unique_ptr<NetApi> openOverlapping(int version, int vdevs[2]) {
  auto net = loadNet(CONFLUX_PLUGIN_PATH, version);
  PT_CHECK(net->init(countingLogger) == 0);
  int physical = 0;
  PT_CHECK(net->devices(&physical) == 0 && physical >= 3, "%d devices (the test needs three)", physical);
  abi::VProps a{2, {0, 1}}, b{2, {2, 1}};
  PT_CHECK(net->makeVDevice(&vdevs[0], &a) == 0 && net->makeVDevice(&vdevs[1], &b) == 0);
  return net;
}

void overlapReceiver(int version, Channel& ch) {
  int vdevs[2];
  auto net = openOverlapping(version, vdevs);
  uint8_t handles[2][abi::kHandleBytes];
  void* lcs[2] = {nullptr, nullptr};
  void* comms[2] = {nullptr, nullptr};
  for (int d = 0; d < 2; ++d) PT_CHECK(net->listen(vdevs[d], handles[d], &lcs[d]) == 0);
  ch.send(handles, sizeof handles);
  for (int d = 0; d < 2; ++d) {
    const auto until = Clock::now() + kPollLimit;
    while (comms[d] == nullptr) {
      PT_CHECK(net->accept(lcs[d], &comms[d]) == 0);
      PT_CHECK(comms[d] != nullptr || Clock::now() < until, "accept did not finish within 30 s");
    }
  }
  std::vector<uint8_t> buf(2 * kOverlapBytes);
  void* mhs[2] = {nullptr, nullptr};
  for (int d = 0; d < 2; ++d) {
    PT_CHECK(net->regMr(comms[d], buf.data() + size_t(d) * kOverlapBytes, kOverlapBytes, abi::kPtrHost, &mhs[d]) == 0);
  }
  for (int round = 0; round < kOverlapRounds; ++round) {
    void* rs[2];
    for (int d = 0; d < 2; ++d) rs[d] = recvOne(*net, comms[d], buf.data() + size_t(d) * kOverlapBytes, kOverlapBytes, 5, mhs[d]);
    ch.barrier();
    for (int d = 0; d < 2; ++d) {
      int got = -1;
      waitDone(*net, rs[d], &got);
      PT_CHECK(size_t(got) == overlapSize(d), "virtual device %d: %d bytes", d, got);
      verify(buf.data() + size_t(d) * kOverlapBytes, overlapSize(d), 600 + size_t(round * 2 + d), "overlapping");
    }
  }
  ch.barrier();
  for (int d = 0; d < 2; ++d) {
    PT_CHECK(net->deregMr(comms[d], mhs[d]) == 0 && net->closeRecv(comms[d]) == 0 && net->closeListen(lcs[d]) == 0);
  }
  PT_CHECK(net->finalize() == 0);
  PT_CHECK(warnings == 0, "%d warnings logged", warnings.load());
}

void overlapSender(int version, Channel& ch) {
  int vdevs[2];
  auto net = openOverlapping(version, vdevs);
  uint8_t handles[2][abi::kHandleBytes];
  ch.recv(handles, sizeof handles);
  void* comms[2] = {nullptr, nullptr};
  for (int d = 0; d < 2; ++d) {
    const auto until = Clock::now() + kPollLimit;
    while (comms[d] == nullptr) {
      PT_CHECK(net->connect(vdevs[d], handles[d], &comms[d]) == 0);
      PT_CHECK(comms[d] != nullptr || Clock::now() < until, "connect did not finish within 30 s");
    }
  }
  std::vector<uint8_t> buf(2 * kOverlapBytes);
  void* mhs[2] = {nullptr, nullptr};
  for (int d = 0; d < 2; ++d) {
    PT_CHECK(net->regMr(comms[d], buf.data() + size_t(d) * kOverlapBytes, kOverlapBytes, abi::kPtrHost, &mhs[d]) == 0);
  }
  for (int round = 0; round < kOverlapRounds; ++round) {
    for (int d = 0; d < 2; ++d) fillPattern(buf.data() + size_t(d) * kOverlapBytes, overlapSize(d), 600 + size_t(round * 2 + d));
    ch.barrier();
    void* ss[2];
    for (int d = 0; d < 2; ++d) ss[d] = sendOne(*net, comms[d], buf.data() + size_t(d) * kOverlapBytes, overlapSize(d), 5, mhs[d]);
    for (int d = 0; d < 2; ++d) waitDone(*net, ss[d], nullptr);
  }
  ch.barrier();
  for (int d = 0; d < 2; ++d) PT_CHECK(net->deregMr(comms[d], mhs[d]) == 0 && net->closeSend(comms[d]) == 0);
  PT_CHECK(net->finalize() == 0);
  PT_CHECK(warnings == 0, "%d warnings logged", warnings.load());
}

class Stripes : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    metricsFile_ = ::testing::TempDir() + "cfx-stripes-" + std::to_string(getpid()) + ".prom";
    ::setenv("CONFLUX_METRICS_INTERVAL_MS", "50", 1);
  }
  void TearDown() override {
    ::unsetenv("CONFLUX_PLUGIN_STRIPE_BYTES");
    ::unsetenv("CONFLUX_METRICS_FILE");
    ::unsetenv("CONFLUX_METRICS_INTERVAL_MS");
  }
  /// Runs the pair with the sender's metrics in a file of its own.
  std::string run() {
    const int version = GetParam();
    const std::string file = metricsFile_;
    return runPair([&](Channel& ch) { receiver(version, ch); },
                   [&](Channel& ch) {
                     ::setenv("CONFLUX_METRICS_FILE", (file + ".sender").c_str(), 1);
                     sender(version, ch);
                     ::unlink((file + ".sender").c_str());
                   });
  }
  std::string metricsFile_;
};

// Two devices on loopback (CONFLUX_OFI_DOMAINS=lo,lo: each its own endpoint and address).
TEST_P(Stripes, Loopback) {
  ::setenv("CONFLUX_OFI_DOMAINS", "lo,lo", 1);
  EXPECT_EQ(run(), "");
}

// A threshold of 16 bytes: stripes of a few bytes, and messages whose last stripe is empty.
TEST_P(Stripes, TinyStripesOnLoopback) {
  ::setenv("CONFLUX_OFI_DOMAINS", "lo,lo", 1);
  ::setenv("CONFLUX_PLUGIN_STRIPE_BYTES", "16", 1);
  EXPECT_EQ(run(), "");
}

// CONFLUX_PLUGIN_STRIPE_BYTES=0: every message on the connection's first rail.
TEST_P(Stripes, OffOnLoopback) {
  ::setenv("CONFLUX_OFI_DOMAINS", "lo,lo", 1);
  ::setenv("CONFLUX_PLUGIN_STRIPE_BYTES", "0", 1);
  EXPECT_EQ(run(), "");
}

// Virtual devices {0,1} and {2,1} over three loopback devices, one connection each.
TEST_P(Stripes, OverlappingVirtualDevicesOnLoopback) {
  ::setenv("CONFLUX_OFI_DOMAINS", "lo,lo,lo", 1);
  const int version = GetParam();
  EXPECT_EQ(runPair([&](Channel& ch) { overlapReceiver(version, ch); }, [&](Channel& ch) { overlapSender(version, ch); }),
            "");
}

// Between two simulated nodes with two rails each, set up by tests/netns/test_plugin_netns.py.
TEST_P(Stripes, AcrossNamespaces) {
  if (std::getenv("CONFLUX_PLUGIN_TEST_NETNS_RECEIVER") == nullptr || std::getenv("CONFLUX_PLUGIN_TEST_NETNS_SENDER") == nullptr) {
    GTEST_SKIP() << "run by tests/netns/test_plugin_netns.py (needs network namespaces)";
  }
  EXPECT_EQ(run(), "");
}

INSTANTIATE_TEST_SUITE_P(PluginNet, Stripes, ::testing::Values(9, 10, 11),
                         [](const ::testing::TestParamInfo<int>& p) { return std::string(1, 'v').append(std::to_string(p.param)); });

}  // namespace
}  // namespace conflux::plugintest
