// plugin-net-bench: latency (half round trip) and bandwidth (a window of messages, then a 1-byte ack) of
// any ncclNet plugin through its exported ABI, between two forked processes, with the same method as
// conflux-ofi-pingpong so that the two compare like for like. Not installed; a first step towards
// `conflux-perf net --plugin`.
//
//   plugin-net-bench [--plugin PATH] [--version 8..11] [--min 8] [--max 67108864] [--window 16]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "net_api.h"
#include "pair_harness.h"

using namespace conflux::plugintest;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string plugin = CONFLUX_PLUGIN_PATH;
  int version = 11;
  size_t min = 8, max = size_t{64} << 20;
  int window = 16;
};

void wait(NetApi& net, void* req) {
  int done = 0;
  while (!done) PT_CHECK(net.test(req, &done, nullptr) == 0);
}

void* post(const std::function<int(void**)>& fn) {
  void* req = nullptr;
  while (req == nullptr) PT_CHECK(fn(&req) == 0);
  return req;
}

void run(const Options& o, bool isReceiver, Channel& ch) {
  auto net = loadNet(o.plugin.c_str(), o.version);
  PT_CHECK(net->init(nullptr) == 0);
  uint8_t handle[abi::kHandleBytes];
  void* comm = nullptr;
  void* listenComm = nullptr;
  // Both directions: each side listens once and connects once (a ping needs a send and a receive comm).
  void* sendComm = nullptr;
  PT_CHECK(net->listen(0, handle, &listenComm) == 0);
  ch.send(handle, sizeof handle);
  uint8_t peer[abi::kHandleBytes];
  ch.recv(peer, sizeof peer);
  while (sendComm == nullptr || comm == nullptr) {
    if (sendComm == nullptr) PT_CHECK(net->connect(0, peer, &sendComm) == 0);
    if (comm == nullptr) PT_CHECK(net->accept(listenComm, &comm) == 0);
  }
  std::vector<uint8_t> buf(o.max + 64), ack(64);
  void *smh = nullptr, *rmh = nullptr;
  PT_CHECK(net->regMr(sendComm, buf.data(), buf.size(), abi::kPtrHost, &smh) == 0);
  PT_CHECK(net->regMr(comm, buf.data(), buf.size(), abi::kPtrHost, &rmh) == 0);
  const int window = std::min(o.window, net->maxRequests() - 1);
  if (!isReceiver) std::printf("# plugin %s v%d, window %d\n# %12s %12s %12s\n", net->name, o.version, window, "bytes", "lat_us", "GB/s");
  for (size_t size = o.min; size <= o.max; size *= 2) {
    const int iters = size <= 65536 ? 2000 : size <= (size_t{4} << 20) ? 100 : 20;
    auto recvOne = [&](size_t cap, int tag) {
      void* d = buf.data();
      return post([&](void** r) { return net->irecv(comm, 1, &d, &cap, &tag, &rmh, r); });
    };
    auto sendOne = [&](size_t n, int tag) {
      return post([&](void** r) { return net->isend(sendComm, buf.data(), n, tag, smh, r); });
    };
    ch.barrier();
    // Latency: ping-pong.
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) {
      if (isReceiver) {
        wait(*net, recvOne(size, 1));
        wait(*net, sendOne(size, 1));
      } else {
        void* r = recvOne(size, 1);
        wait(*net, sendOne(size, 1));
        wait(*net, r);
      }
    }
    const double latUs = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters / 2;
    ch.barrier();
    // Bandwidth: a window of messages, then an ack.
    const auto t1 = Clock::now();
    for (int i = 0; i < iters; ++i) {
      std::vector<void*> reqs;
      for (int w = 0; w < window; ++w) reqs.push_back(isReceiver ? recvOne(size, 2) : sendOne(size, 2));
      for (void* r : reqs) wait(*net, r);
      if (isReceiver) {
        wait(*net, sendOne(1, 3));
      } else {
        wait(*net, recvOne(1, 3));
      }
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t1).count();
    if (!isReceiver) std::printf("  %12zu %12.2f %12.3f\n", size, latUs, double(size) * window * iters / secs / 1e9);
    std::fflush(stdout);
  }
  ch.barrier();
  PT_CHECK(net->deregMr(sendComm, smh) == 0 && net->deregMr(comm, rmh) == 0);
  PT_CHECK(net->closeSend(sendComm) == 0 && net->closeRecv(comm) == 0 && net->closeListen(listenComm) == 0);
  PT_CHECK(net->finalize() == 0);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--plugin") o.plugin = argv[i + 1];
    else if (a == "--version") o.version = std::atoi(argv[i + 1]);
    else if (a == "--min") o.min = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--max") o.max = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--window") o.window = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: plugin-net-bench [--plugin PATH] [--version 8..11] [--min B] [--max B] [--window N]\n");
      return 2;
    }
  }
  if (std::getenv("CONFLUX_OFI_DOMAINS") == nullptr) ::setenv("CONFLUX_OFI_DOMAINS", "lo", 1);
  const std::string failure = runPair([&](Channel& ch) { run(o, true, ch); }, [&](Channel& ch) { run(o, false, ch); }, 600);
  if (!failure.empty()) std::fprintf(stderr, "plugin-net-bench: %s\n", failure.c_str());
  return failure.empty() ? 0 : 1;
}
