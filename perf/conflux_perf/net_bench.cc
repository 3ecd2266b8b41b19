// conflux-perf net: the measuring loops (see net_bench.h for their schedules).
#include "net_bench.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace cfxperf {
namespace {

using Clock = std::chrono::steady_clock;

enum Tag : int { kPingTag = 1, kDataTag = 2, kAckTag = 3, kCheckTag = 4 };

template <class Post>
int postWhenFree(Post&& post) {
  int h = -1;
  while ((h = post()) < 0) {
  }
  return h;
}

void waitFor(NetTarget& t, int handle, size_t* bytes = nullptr) {
  while (!t.test(handle, bytes)) {
  }
}

void waitAll(NetTarget& t, std::vector<int>& handles) {
  for (int h : handles) waitFor(t, h);
  handles.clear();
}

uint8_t patternByte(size_t i, int seed) { return uint8_t(i * 131 + size_t(seed) * 29 + (i >> 8)); }

}  // namespace

double measureLatency(NetTarget& t, const NetLoop& l) {
  l.barrier();
  const auto start = Clock::now();
  for (int i = 0; i < l.iters; ++i) {
    if (l.rank == 0) {
      const int r = postWhenFree([&] { return t.postRecv(l.bytes, kPingTag); });
      const int s = postWhenFree([&] { return t.postSend(l.bytes, kPingTag); });
      waitFor(t, s);
      waitFor(t, r);
    } else {
      waitFor(t, postWhenFree([&] { return t.postRecv(l.bytes, kPingTag); }));
      waitFor(t, postWhenFree([&] { return t.postSend(l.bytes, kPingTag); }));
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  return l.rank == 0 ? secs / l.iters / 2 : 0;
}

double measureUni(NetTarget& t, const NetLoop& l) {
  std::vector<int> handles;
  l.barrier();
  const auto start = Clock::now();
  for (int i = 0; i < l.iters; ++i) {
    if (l.rank == 0) {
      const int ack = postWhenFree([&] { return t.postRecv(1, kAckTag); });
      for (int w = 0; w < l.window; ++w) handles.push_back(postWhenFree([&] { return t.postSend(l.bytes, kDataTag); }));
      waitAll(t, handles);
      waitFor(t, ack);
    } else {
      for (int w = 0; w < l.window; ++w) handles.push_back(postWhenFree([&] { return t.postRecv(l.bytes, kDataTag); }));
      waitAll(t, handles);
      waitFor(t, postWhenFree([&] { return t.postSend(1, kAckTag); }));
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  return l.rank == 0 ? secs / l.iters : 0;
}

double measureBidir(NetTarget& t, const NetLoop& l) {
  std::vector<int> handles;
  l.barrier();
  const auto start = Clock::now();
  for (int i = 0; i < l.iters; ++i) {
    for (int w = 0; w < l.window; ++w) handles.push_back(postWhenFree([&] { return t.postRecv(l.bytes, kDataTag); }));
    for (int w = 0; w < l.window; ++w) handles.push_back(postWhenFree([&] { return t.postSend(l.bytes, kDataTag); }));
    waitAll(t, handles);
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  return l.rank == 0 ? secs / l.iters : 0;
}

size_t checkExchange(NetTarget& t, const NetLoop& l, int seed) {
  size_t wrong = 0;
  for (int sender = 0; sender < 2; ++sender) {
    l.barrier();
    if (l.rank == sender) {
      for (size_t i = 0; i < l.bytes; ++i) l.buffers.send[i] = patternByte(i, seed + sender);
      waitFor(t, postWhenFree([&] { return t.postSend(l.bytes, kCheckTag); }));
    } else {
      std::fill(l.buffers.recv, l.buffers.recv + l.bytes, uint8_t(0x5a));
      size_t got = 0;
      waitFor(t, postWhenFree([&] { return t.postRecv(l.bytes, kCheckTag); }), &got);
      if (got != l.bytes) wrong += l.bytes > got ? l.bytes - got : got - l.bytes;
      for (size_t i = 0; i < std::min(got, l.bytes); ++i) wrong += l.buffers.recv[i] != patternByte(i, seed + sender);
    }
  }
  return wrong;
}

int autoLatencyIters(size_t bytes) {
  return int(std::clamp<size_t>((size_t{8} << 20) / std::max<size_t>(bytes, 1), 4, 1000));
}

int autoBandwidthIters(size_t bytes, int window) {
  return int(std::clamp<size_t>((size_t{128} << 20) / (std::max<size_t>(bytes, 1) * size_t(window)), 3, 500));
}

}  // namespace cfxperf
