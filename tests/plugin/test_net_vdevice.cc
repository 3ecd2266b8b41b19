// Virtual devices (makeVDevice, ABI v9..v11) of libnccl-net-conflux.so, through its exports only:
// refusals (no members, more than 4, a device that does not exist, one listed twice), the same list giving
// the same index, devices() counting it, properties of the group (members, summed speed, joined names), and 2 x members
// connections on the virtual device, each carrying a checked 4 MiB message, with a receiver and a sender
// process. Connection c runs on member c % members on both sides; between namespaces with two rails
// (tests/netns/test_plugin_netns.py) the script then checks that bytes crossed both links.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdarg>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "net_test_util.h"

namespace conflux::plugintest {
namespace {

namespace abi = conflux::plugin::abi;
using conflux::plugin::loadNet;
using conflux::plugin::NetApi;

using Clock = std::chrono::steady_clock;
constexpr auto kLimit = kPollLimit;
constexpr size_t kMessageBytes = size_t{4} << 20;

uint8_t pattern(size_t i, size_t seed) { return uint8_t(i * 151 + seed * 17 + (i >> 12)); }

struct Opened {
  std::unique_ptr<NetApi> net;
  int physical = 0;
  int vdev = -1;
  int members = 0;
  int baselineFds = 0;
};

/// Loads and checks the refusals, the index, idempotence and the group's properties.
Opened openVirtual(int version) {
  Opened o;
  o.net = loadNet(CONFLUX_PLUGIN_PATH, version);
  PT_CHECK(o.net->init(countingLogger) == 0);
  o.baselineFds = openFds();
  PT_CHECK(o.net->devices(&o.physical) == 0 && o.physical >= 1);
  NetApi& net = *o.net;
  int d = -7;
  abi::VProps none{0, {}};
  PT_CHECK(net.makeVDevice(&d, &none) != 0, "a virtual device of no members is refused");
  abi::VProps five{5, {0, 0, 0, 0}};
  PT_CHECK(net.makeVDevice(&d, &five) != 0, "more than 4 members are refused");
  abi::VProps missing{1, {o.physical}};
  PT_CHECK(net.makeVDevice(&d, &missing) != 0, "a member past the last device is refused");
  abi::VProps twice{2, {0, 0}};
  PT_CHECK(net.makeVDevice(&d, &twice) != 0, "a member listed twice is refused");
  PT_CHECK(d == -7, "a refused makeVDevice left the index alone");
  warnings = 0;  // the refusals are logged on purpose

  o.members = std::min(o.physical, abi::kMaxVDevs);
  abi::VProps group{o.members, {}};
  for (int i = 0; i < o.members; ++i) group.devs[i] = i;
  PT_CHECK(net.makeVDevice(&o.vdev, &group) == 0);
  PT_CHECK(o.vdev == o.physical, "the first virtual device is %d, after %d physical", o.vdev, o.physical);
  int again = -1;
  PT_CHECK(net.makeVDevice(&again, &group) == 0 && again == o.vdev, "the same members give the same device");
  int count = 0;
  PT_CHECK(net.devices(&count) == 0 && count == o.physical + 1,
           "devices() is %d after one makeVDevice on %d physical devices (NCCL takes the new ones from it)", count,
           o.physical);

  abi::PropertiesV11 p{};
  PT_CHECK(net.properties(o.vdev, &p) == 0);
  PT_CHECK(p.vProps.ndevs == o.members, "vProps lists %d members, want %d", p.vProps.ndevs, o.members);
  int speed = 0;
  std::string names;
  for (int i = 0; i < o.members; ++i) {
    PT_CHECK(p.vProps.devs[i] == i);
    abi::PropertiesV11 m{};
    PT_CHECK(net.properties(i, &m) == 0);
    speed += m.speed;
    if (i > 0) names.push_back('+');
    names.append(m.name);
  }
  PT_CHECK(p.speed == speed, "speed %d, members add up to %d", p.speed, speed);
  PT_CHECK(p.name != nullptr && names == p.name, "name %s, want %s", p.name ? p.name : "(null)", names.c_str());
  PT_CHECK(p.ptrSupport == abi::kPtrHost && p.maxRecvs == 8 && p.netDeviceType == abi::kDeviceHost);
  PT_CHECK(net.properties(o.vdev + 1, &p) != 0, "no device past the last virtual one");
  warnings = 0;
  return o;
}

void finish(Opened& o) {
  PT_CHECK(o.net->finalize() == 0);
  PT_CHECK(openFds() == o.baselineFds, "descriptors open after close: %d, before: %d", openFds(), o.baselineFds);
  PT_CHECK(warnings == 0, "%d warnings logged", warnings.load());
}

void receiver(int version, Channel& ch) {
  Opened o = openVirtual(version);
  NetApi& net = *o.net;
  const int connections = 2 * o.members;
  uint8_t handle[abi::kHandleBytes];
  void* lc = nullptr;
  PT_CHECK(net.listen(o.vdev, handle, &lc) == 0 && lc != nullptr);
  ch.send(handle, sizeof handle);
  std::vector<void*> comms(size_t(connections), nullptr);
  for (void*& c : comms) {
    const auto until = Clock::now() + kLimit;
    while (c == nullptr) {
      PT_CHECK(net.accept(lc, &c) == 0);
      PT_CHECK(c != nullptr || Clock::now() < until, "accept did not finish within 30 s");
    }
  }
  // Each sender comm names itself first (accepts may come in any order), then sends its big message in
  // that order.
  std::vector<int> indices(size_t(connections), -1);
  std::vector<void*> byIndex(size_t(connections), nullptr);
  for (size_t k = 0; k < comms.size(); ++k) {
    void* data = &indices[k];
    size_t cap = sizeof(int);
    int tag = 1;
    waitDone(net, postUntil([&](void** r) { return net.irecv(comms[k], 1, &data, &cap, &tag, nullptr, r); }), nullptr);
    const int index = indices[k];
    PT_CHECK(index >= 0 && index < connections && byIndex[size_t(index)] == nullptr, "connection index %d", index);
    byIndex[size_t(index)] = comms[k];
  }
  std::vector<uint8_t> buf(kMessageBytes);
  for (int index = 0; index < connections; ++index) {
    void* c = byIndex[size_t(index)];
    void* mh = nullptr;
    PT_CHECK(net.regMr(c, buf.data(), buf.size(), abi::kPtrHost, &mh) == 0);
    std::memset(buf.data(), 0, buf.size());
    void* data = buf.data();
    size_t cap = buf.size();
    int tag = 2;
    int got = -1;
    waitDone(net, postUntil([&](void** r) { return net.irecv(c, 1, &data, &cap, &tag, &mh, r); }), &got);
    PT_CHECK(size_t(got) == kMessageBytes, "connection %d received %d bytes", index, got);
    for (size_t i = 0; i < kMessageBytes; ++i) {
      PT_CHECK(buf[i] == pattern(i, size_t(index)), "connection %d, byte %zu", index, i);
    }
    PT_CHECK(net.deregMr(c, mh) == 0);
  }
  ch.barrier();
  for (void* c : comms) PT_CHECK(net.closeRecv(c) == 0);
  PT_CHECK(net.closeListen(lc) == 0);
  finish(o);
}

void sender(int version, Channel& ch) {
  Opened o = openVirtual(version);
  NetApi& net = *o.net;
  const int connections = 2 * o.members;
  uint8_t received[abi::kHandleBytes];
  ch.recv(received, sizeof received);
  std::vector<std::vector<uint8_t>> handles(size_t(connections), std::vector<uint8_t>(received, received + sizeof received));
  std::vector<void*> comms(size_t(connections), nullptr);
  for (int i = 0; i < connections; ++i) {  // one after the other: connection i takes member i % members
    const auto until = Clock::now() + kLimit;
    while (comms[size_t(i)] == nullptr) {
      PT_CHECK(net.connect(o.vdev, handles[size_t(i)].data(), &comms[size_t(i)]) == 0);
      PT_CHECK(comms[size_t(i)] != nullptr || Clock::now() < until, "connect did not finish within 30 s");
    }
  }
  std::vector<int> ids(static_cast<size_t>(connections));
  for (int i = 0; i < connections; ++i) {
    ids[size_t(i)] = i;
    void* c = comms[size_t(i)];
    waitDone(net, postUntil([&](void** r) { return net.isend(c, &ids[size_t(i)], sizeof(int), 1, nullptr, r); }), nullptr);
  }
  std::vector<uint8_t> buf(kMessageBytes);
  for (int i = 0; i < connections; ++i) {
    void* c = comms[size_t(i)];
    for (size_t b = 0; b < kMessageBytes; ++b) buf[b] = pattern(b, size_t(i));
    void* mh = nullptr;
    PT_CHECK(net.regMr(c, buf.data(), buf.size(), abi::kPtrHost, &mh) == 0);
    waitDone(net, postUntil([&](void** r) { return net.isend(c, buf.data(), buf.size(), 2, mh, r); }), nullptr);
    PT_CHECK(net.deregMr(c, mh) == 0);
  }
  ch.barrier();
  for (void* c : comms) PT_CHECK(net.closeSend(c) == 0);
  finish(o);
}

class VirtualDevice : public ::testing::TestWithParam<int> {};

// Two devices on loopback (CONFLUX_OFI_DOMAINS=lo,lo: each device its own endpoint and address), so
// connections run on rail 1 as well as rail 0.
TEST_P(VirtualDevice, Loopback) {
  ::setenv("CONFLUX_OFI_DOMAINS", "lo,lo", 1);
  const int version = GetParam();
  EXPECT_EQ(runPair([&](Channel& ch) { receiver(version, ch); }, [&](Channel& ch) { sender(version, ch); }), "");
}

// Between two simulated nodes with two rails each (CONFLUX_OFI_DOMAINS=rail0,rail1), set up by
// tests/netns/test_plugin_netns.py, which also checks the links' byte counters afterwards.
TEST_P(VirtualDevice, AcrossNamespaces) {
  if (std::getenv("CONFLUX_PLUGIN_TEST_NETNS_RECEIVER") == nullptr || std::getenv("CONFLUX_PLUGIN_TEST_NETNS_SENDER") == nullptr) {
    GTEST_SKIP() << "run by tests/netns/test_plugin_netns.py (needs network namespaces)";
  }
  const int version = GetParam();
  EXPECT_EQ(runPair([&](Channel& ch) { receiver(version, ch); }, [&](Channel& ch) { sender(version, ch); }), "");
}

INSTANTIATE_TEST_SUITE_P(PluginNet, VirtualDevice, ::testing::Values(9, 10, 11),
                         [](const ::testing::TestParamInfo<int>& p) { return std::string(1, 'v').append(std::to_string(p.param)); });

}  // namespace
}  // namespace conflux::plugintest
