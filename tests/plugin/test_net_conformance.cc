// Conformance of libnccl-net-conflux.so through its exported ncclNetPlugin_v8..v11 only, driven the way
// NCCL's proxy drives a plugin: a receiver and a sender process over loopback (CONFLUX_OFI_DOMAINS=lo).
//
// Phases, in the same order on both sides: properties; listen/connect/accept loops (two connections on
// one listen comm); regMr; sizes 0 B..64 MiB; requests in flight up to the limit and NULL beyond it;
// grouped receives; truncation (capacity > sent size); tag matching and same-tag order; iflush; deregMr;
// close, with the process's open file descriptors back where they were.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "net_test_util.h"

namespace conflux::plugintest {
namespace {

namespace abi = conflux::plugin::abi;
using conflux::plugin::loadNet;
using conflux::plugin::NetApi;

constexpr size_t kBufferBytes = (size_t{64} << 20) + 4096;
const size_t kSizes[] = {0, 1, 7, 63, 64, 65, 4095, 4096, 65537, (size_t{1} << 20) + 3, size_t{64} << 20};

char phaseBuf[64];
void sizePhase(size_t size) {
  std::snprintf(phaseBuf, sizeof phaseBuf, "sizes: %zu bytes", size);
  phase = phaseBuf;
}

uint8_t pattern(size_t i, size_t seed) { return uint8_t((i * 131 + seed * 7) ^ (i >> 9)); }
void fill(uint8_t* p, size_t n, size_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = pattern(i, seed);
}
void verify(const uint8_t* p, size_t n, size_t seed) {
  for (size_t i = 0; i < n; ++i) PT_CHECK(p[i] == pattern(i, seed), "byte %zu of a %zu-byte message (seed %zu)", i, n, seed);
}

using Clock = std::chrono::steady_clock;
constexpr auto kLimit = kPollLimit;

struct Side {
  std::unique_ptr<NetApi> net;
  int baselineFds = 0;
  std::vector<uint8_t> buf = std::vector<uint8_t>(kBufferBytes);
};

Side open(int version) {
  Side s;
  s.net = loadNet(CONFLUX_PLUGIN_PATH, version);
  PT_CHECK(std::strcmp(s.net->name, "Conflux") == 0);
  PT_CHECK(s.net->init(countingLogger) == 0);
  s.baselineFds = openFds();
  int n = 0;
  PT_CHECK(s.net->devices(&n) == 0 && n >= 1, "%d devices", n);
  abi::PropertiesV11 p;
  PT_CHECK(s.net->properties(0, &p) == 0);
  // The device is the one CONFLUX_OFI_DOMAINS names: lo on loopback, a veth between namespaces (neither
  // has a PCI path).
  const char* want = std::getenv("CONFLUX_OFI_DOMAINS");
  PT_CHECK(p.name != nullptr && want != nullptr && std::strcmp(p.name, want) == 0, "device 0 is %s, want %s",
           p.name ? p.name : "(null)", want ? want : "(unset)");
  PT_CHECK(p.pciPath == nullptr, "%s has no PCI path", p.name);
  PT_CHECK(p.ptrSupport == abi::kPtrHost && p.netDeviceType == abi::kDeviceHost);
  PT_CHECK(p.speed > 0 && p.maxComms > 0 && p.maxRecvs == 8 && p.guid != 0);
  if (version >= 9) {
    PT_CHECK(p.vProps.ndevs == 1 && p.vProps.devs[0] == 0);
    PT_CHECK(p.maxP2pBytes >= (size_t{64} << 20) && p.maxCollBytes >= (size_t{64} << 20));
  }
  if (version >= 11) PT_CHECK(p.maxMultiRequestSize == 1);
  PT_CHECK(s.net->properties(n, &p) != 0, "a device past the last is an error");
  warnings = 0;  // that refusal is logged on purpose
  return s;
}

void closeAndCheckFds(Side& s) {
  PT_CHECK(s.net->finalize() == 0);
  const int fds = openFds();
  PT_CHECK(fds == s.baselineFds, "%d descriptors open after close, %d before listen/connect", fds, s.baselineFds);
  PT_CHECK(warnings == 0, "%d warnings logged", warnings.load());
}

void receiver(int version, Channel& ch) {
  Side s = open(version);
  NetApi& net = *s.net;
  uint8_t handle[abi::kHandleBytes];
  void* lc = nullptr;
  PT_CHECK(net.listen(0, handle, &lc) == 0 && lc != nullptr);
  ch.send(handle, sizeof handle);
  void* rc[2] = {nullptr, nullptr};
  for (void*& c : rc) {
    const auto until = Clock::now() + kLimit;
    while (c == nullptr) {
      PT_CHECK(net.accept(lc, &c) == 0);
      PT_CHECK(c != nullptr || Clock::now() < until, "accept did not finish within 30 s");
    }
  }
  // Both connections came through one listen comm in either order: each sender comm names itself.
  int which[2] = {-1, -1};
  for (int i = 0; i < 2; ++i) {
    void* data = &which[i];
    size_t cap = sizeof which[i];
    int tag = 7;
    void* r = postUntil([&](void** out) { return net.irecv(rc[i], 1, &data, &cap, &tag, nullptr, out); });
    waitDone(net, r, nullptr);
  }
  PT_CHECK((which[0] == 0 && which[1] == 1) || (which[0] == 1 && which[1] == 0), "%d %d", which[0], which[1]);
  if (which[0] == 1) std::swap(rc[0], rc[1]);
  void* mh = nullptr;
  PT_CHECK(net.regMr(rc[0], s.buf.data(), s.buf.size(), abi::kPtrHost, &mh) == 0 && mh != nullptr);
  void* cudaMh = nullptr;
  PT_CHECK(net.regMr(rc[0], s.buf.data(), 4096, abi::kPtrCuda, &cudaMh) != 0, "CUDA memory is not supported");
  warnings = 0;  // that refusal is logged on purpose
  auto recv1 = [&](void* comm, size_t offset, size_t cap, int tag) {
    void* data = s.buf.data() + offset;
    return postUntil([&](void** r) { return net.irecv(comm, 1, &data, &cap, &tag, &mh, r); });
  };

  phase = "sizes";
  for (size_t size : kSizes) {  // every size, exact capacity
    sizePhase(size);
    int got = -1;
    waitDone(net, recv1(rc[0], 0, size, int(size & 0x7fff)), &got);
    PT_CHECK(size_t(got) == size, "received %d of %zu bytes", got, size);
    verify(s.buf.data(), size, size);
  }
  phase = "in flight";
  // Requests in flight: the limit is accepted, one more is refused with a NULL request.
  const int k = net.maxRequests();
  std::vector<void*> reqs;
  for (int i = 0; i < k; ++i) {
    void* data = s.buf.data() + size_t(i) * 8192;
    size_t cap = 8192;
    int tag = 1000 + i;
    void* r = nullptr;
    PT_CHECK(net.irecv(rc[0], 1, &data, &cap, &tag, &mh, &r) == 0 && r != nullptr, "request %d of %d", i, k);
    reqs.push_back(r);
  }
  {
    void* data = s.buf.data();
    size_t cap = 1;
    int tag = 999;
    void* r = &reqs;
    PT_CHECK(net.irecv(rc[0], 1, &data, &cap, &tag, &mh, &r) == 0 && r == nullptr, "request %d must be NULL", k + 1);
  }
  ch.barrier();
  for (int i = 0; i < k; ++i) {
    int got = -1;
    waitDone(net, reqs[size_t(i)], &got);
    PT_CHECK(got == 100 + i);
    verify(s.buf.data() + size_t(i) * 8192, size_t(got), size_t(i));
  }
  phase = "grouped";
  // Grouped receive: 8 buffers, 8 tags, capacities larger than the messages (sent in reverse order).
  {
    void* data[8];
    size_t caps[8];
    int tags[8];
    void* mhs[8];
    for (int i = 0; i < 8; ++i) {
      data[i] = s.buf.data() + size_t(i) * 65536;
      caps[i] = 65536;
      tags[i] = 2000 + i;
      mhs[i] = mh;
    }
    void* r = postUntil([&](void** out) { return net.irecv(rc[0], 8, data, caps, tags, mhs, out); });
    int got[8];
    waitDone(net, r, got);
    for (int i = 0; i < 8; ++i) {
      PT_CHECK(got[i] == (i + 1) * 1000 + 1, "buffer %d received %d bytes", i, got[i]);
      verify(static_cast<uint8_t*>(data[i]), size_t(got[i]), size_t(2000 + i));
    }
  }
  phase = "truncation";
  // Truncation rule and zero bytes into a large buffer.
  for (size_t sent : {size_t{1000}, size_t{0}}) {
    int got = -1;
    waitDone(net, recv1(rc[0], 0, size_t{1} << 20, 3000), &got);
    PT_CHECK(size_t(got) == sent, "received %d bytes of %zu sent into 1 MiB", got, sent);
    verify(s.buf.data(), sent, 3000);
  }
  phase = "tags";
  // Tags: receives posted in the order 4003, 4001, 4002 get the messages with their tags.
  {
    void* r3 = recv1(rc[0], 0, 4096, 4003);
    void* r1 = recv1(rc[0], 4096, 4096, 4001);
    void* r2 = recv1(rc[0], 8192, 4096, 4002);
    ch.barrier();
    int got[3] = {-1, -1, -1};
    waitDone(net, r1, &got[0]);
    waitDone(net, r2, &got[1]);
    waitDone(net, r3, &got[2]);
    PT_CHECK(got[0] == 101 && got[1] == 202 && got[2] == 303, "%d %d %d", got[0], got[1], got[2]);
    verify(s.buf.data(), 303, 4003);
  }
  phase = "same tag";
  // Same tag: matched in order; the second connection's messages stay on the second comm.
  {
    void* other = nullptr;
    PT_CHECK(net.regMr(rc[1], s.buf.data(), s.buf.size(), abi::kPtrHost, &other) == 0);
    std::vector<void*> rs;
    for (int i = 0; i < 4; ++i) rs.push_back(recv1(rc[0], size_t(i) * 1024, 1024, 5000));
    void* data = s.buf.data() + 65536;
    size_t cap = 1024;
    int tag = 5000;
    void* ro = postUntil([&](void** r) { return net.irecv(rc[1], 1, &data, &cap, &tag, &other, r); });
    for (int i = 0; i < 4; ++i) {
      int got = -1;
      waitDone(net, rs[size_t(i)], &got);
      PT_CHECK(got == 10 * (i + 1), "same-tag message %d carried %d bytes", i, got);
    }
    int got = -1;
    waitDone(net, ro, &got);
    PT_CHECK(got == 777, "second connection received %d bytes", got);
    PT_CHECK(net.deregMr(rc[1], other) == 0);
  }
  void* flush = &s;
  int flushSize = 8;
  void* flushData = s.buf.data();
  PT_CHECK(net.iflush(rc[0], 1, &flushData, &flushSize, &mh, &flush) == 0 && flush == nullptr);
  PT_CHECK(net.deregMr(rc[0], mh) == 0);
  ch.barrier();
  PT_CHECK(net.closeRecv(rc[0]) == 0 && net.closeRecv(rc[1]) == 0 && net.closeListen(lc) == 0);
  closeAndCheckFds(s);
}

void sender(int version, Channel& ch) {
  Side s = open(version);
  NetApi& net = *s.net;
  uint8_t handles[2][abi::kHandleBytes];
  ch.recv(handles[0], abi::kHandleBytes);
  std::memcpy(handles[1], handles[0], abi::kHandleBytes);
  void* sc[2] = {nullptr, nullptr};
  const auto until = Clock::now() + kLimit;
  while (sc[0] == nullptr || sc[1] == nullptr) {  // both connections in progress at once
    for (int i = 0; i < 2; ++i) {
      if (sc[i] == nullptr) PT_CHECK(net.connect(0, handles[i], &sc[i]) == 0);
    }
    PT_CHECK(Clock::now() < until, "connect did not finish within 30 s");
  }
  int ids[2] = {0, 1};
  for (int i = 0; i < 2; ++i) {
    void* r = postUntil([&](void** out) { return net.isend(sc[i], &ids[i], sizeof ids[i], 7, nullptr, out); });
    waitDone(net, r, nullptr);
  }
  void* mh = nullptr;
  PT_CHECK(net.regMr(sc[0], s.buf.data(), s.buf.size(), abi::kPtrHost, &mh) == 0 && mh != nullptr);
  auto send = [&](void* comm, void* m, size_t offset, size_t size, int tag) {
    return postUntil([&](void** r) { return net.isend(comm, s.buf.data() + offset, size, tag, m, r); });
  };

  phase = "sizes";
  for (size_t size : kSizes) {
    sizePhase(size);
    fill(s.buf.data(), size, size);
    int got = -1;
    waitDone(net, send(sc[0], mh, 0, size, int(size & 0x7fff)), &got);
    PT_CHECK(size_t(got) == size);
  }
  phase = "in flight";
  const int k = net.maxRequests();
  std::vector<void*> reqs;
  for (int i = 0; i < k; ++i) {
    fill(s.buf.data() + size_t(i) * 8192, size_t(100 + i), size_t(i));
    void* r = nullptr;
    PT_CHECK(net.isend(sc[0], s.buf.data() + size_t(i) * 8192, 100 + i, 1000 + i, mh, &r) == 0 && r != nullptr);
    reqs.push_back(r);
  }
  void* extra = &reqs;
  PT_CHECK(net.isend(sc[0], s.buf.data(), 1, 999, mh, &extra) == 0 && extra == nullptr, "request %d must be NULL", k + 1);
  ch.barrier();
  for (void* r : reqs) waitDone(net, r, nullptr);
  phase = "grouped";
  for (int i = 7; i >= 0; --i) {
    const size_t off = size_t(i) * 65536, size = size_t(i + 1) * 1000 + 1;
    fill(s.buf.data() + off, size, size_t(2000 + i));
    waitDone(net, send(sc[0], mh, off, size, 2000 + i), nullptr);
  }
  for (size_t size : {size_t{1000}, size_t{0}}) {
    fill(s.buf.data(), size, 3000);
    waitDone(net, send(sc[0], mh, 0, size, 3000), nullptr);
  }
  phase = "tags";
  ch.barrier();  // the receiver posted its three receives
  fill(s.buf.data(), 303, 4003);
  for (int t : {4001, 4002, 4003}) waitDone(net, send(sc[0], mh, 0, size_t(t - 4000) * 101, t), nullptr);
  void* other = nullptr;
  PT_CHECK(net.regMr(sc[1], s.buf.data(), s.buf.size(), abi::kPtrHost, &other) == 0);
  waitDone(net, send(sc[1], other, 0, 777, 5000), nullptr);
  for (int i = 0; i < 4; ++i) waitDone(net, send(sc[0], mh, 0, size_t(10 * (i + 1)), 5000), nullptr);
  PT_CHECK(net.deregMr(sc[1], other) == 0 && net.deregMr(sc[0], mh) == 0);
  ch.barrier();
  PT_CHECK(net.closeSend(sc[0]) == 0 && net.closeSend(sc[1]) == 0);
  closeAndCheckFds(s);
}

class Conformance : public ::testing::TestWithParam<int> {};

TEST_P(Conformance, Loopback) {
  ::setenv("CONFLUX_OFI_DOMAINS", "lo", 1);
  const int version = GetParam();
  const std::string failure =
      runPair([&](Channel& ch) { receiver(version, ch); }, [&](Channel& ch) { sender(version, ch); });
  EXPECT_EQ(failure, "");
}

// The same between two simulated nodes: tests/netns/test_plugin_netns.py creates the namespaces, names
// them in CONFLUX_PLUGIN_TEST_NETNS_RECEIVER/_SENDER and the device in CONFLUX_OFI_DOMAINS.
TEST_P(Conformance, AcrossNamespaces) {
  if (std::getenv("CONFLUX_PLUGIN_TEST_NETNS_RECEIVER") == nullptr || std::getenv("CONFLUX_PLUGIN_TEST_NETNS_SENDER") == nullptr) {
    GTEST_SKIP() << "run by tests/netns/test_plugin_netns.py (needs network namespaces)";
  }
  const int version = GetParam();
  const std::string failure =
      runPair([&](Channel& ch) { receiver(version, ch); }, [&](Channel& ch) { sender(version, ch); });
  EXPECT_EQ(failure, "");
}

INSTANTIATE_TEST_SUITE_P(PluginNet, Conformance, ::testing::Values(8, 9, 10, 11),
                         [](const ::testing::TestParamInfo<int>& p) { return std::string(1, 'v').append(std::to_string(p.param)); });

}  // namespace
}  // namespace conflux::plugintest
