// conflux-ofi-pingpong: latency (half round trip) and bandwidth (a window of messages, then an ack)
// between two processes over conflux::ofi::Transport. With --rma, also the bandwidth of RMA writes: rank 1
// exposes its buffer once and sends the key; rank 0 writes a window, sends a 1-byte "done", rank 1 acks. Addresses are exchanged through one TCP connection:
// rank 0 listens on --addr host:port, rank 1 connects to it. --local forks both ranks on 127.0.0.1.
//
//   conflux-ofi-pingpong --rank 0 --addr 10.200.0.1:5555 --bind 10.200.0.1     (node A)
//   conflux-ofi-pingpong --rank 1 --addr 10.200.0.1:5555 --bind 10.200.0.2     (node B)
//   conflux-ofi-pingpong --local [--min 8] [--max 67108864] [--window 16] [--rails 2] [--rma]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "transport/ofi/transport.h"

namespace {

using conflux::ofi::Request;
using conflux::ofi::Transport;

struct Args {
  int rank = -1;
  std::string host = "127.0.0.1";
  int port = 0;
  std::string bind;
  std::string provider;
  size_t minBytes = 8, maxBytes = size_t(64) << 20;
  int window = 16;
  int rails = 0;
  size_t chunk = 0;
  int inflight = 0;
  bool local = false;
  bool rma = false;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: conflux-ofi-pingpong (--rank 0|1 --addr HOST:PORT | --local) [--bind ADDR] [--provider P]\n"
               "       [--min BYTES] [--max BYTES] [--window N] [--rails N] [--chunk BYTES] [--inflight N] [--rma]\n");
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (k == "--rank") a.rank = std::atoi(value().c_str());
    else if (k == "--addr") {
      std::string v = value();
      auto colon = v.rfind(':');
      if (colon == std::string::npos) usage();
      a.host = v.substr(0, colon);
      a.port = std::atoi(v.c_str() + colon + 1);
    } else if (k == "--bind") a.bind = value();
    else if (k == "--provider") a.provider = value();
    else if (k == "--min") a.minBytes = std::strtoull(value().c_str(), nullptr, 0);
    else if (k == "--max") a.maxBytes = std::strtoull(value().c_str(), nullptr, 0);
    else if (k == "--window") a.window = std::atoi(value().c_str());
    else if (k == "--rails") a.rails = std::atoi(value().c_str());
    else if (k == "--chunk") a.chunk = std::strtoull(value().c_str(), nullptr, 0);
    else if (k == "--inflight") a.inflight = std::atoi(value().c_str());
    else if (k == "--local") a.local = true;
    else if (k == "--rma") a.rma = true;
    else usage();
  }
  if (!a.local && (a.rank < 0 || a.rank > 1 || a.port <= 0)) usage();
  if (a.window < 1) a.window = 1;
  return a;
}

void writeAll(int fd, const void* p, size_t n) {
  auto* b = static_cast<const uint8_t*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, b, n);
    if (w <= 0) throw std::runtime_error("exchange: write failed");
    b += w;
    n -= size_t(w);
  }
}

void readAll(int fd, void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    ssize_t r = ::read(fd, b, n);
    if (r <= 0) throw std::runtime_error("exchange: peer closed");
    b += r;
    n -= size_t(r);
  }
}

/// Rank 0 accepts one connection on host:port; rank 1 connects (retrying for 30 s).
int connectPeer(const Args& a, int listenFd) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(a.port));
  if (::inet_pton(AF_INET, a.host.c_str(), &sa.sin_addr) != 1) throw std::runtime_error("bad --addr host");
  if (a.rank == 0) {
    int fd = listenFd;
    if (fd < 0) {
      fd = ::socket(AF_INET, SOCK_STREAM, 0);
      int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 1) != 0) {
        throw std::runtime_error("cannot listen on " + a.host + ":" + std::to_string(a.port));
      }
    }
    int c = ::accept(fd, nullptr, nullptr);
    ::close(fd);
    if (c < 0) throw std::runtime_error("accept failed");
    return c;
  }
  for (int attempt = 0; attempt < 300; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) return fd;
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw std::runtime_error("cannot connect to " + a.host + ":" + std::to_string(a.port));
}

void check(const conflux::Status& s) {
  if (!s.isOk()) throw std::runtime_error(s.message());
}

/// Bandwidth of RMA writes: rank 0 writes a window of `bytes` into rank 1's exposed buffer, then sends a
/// 1-byte "done"; rank 1 (which drives progress while it waits) answers with a 1-byte ack. Returns GB/s.
double rmaBandwidth(const Args& a, Transport& t, const conflux::ofi::RemoteKey& key, const std::vector<uint8_t>& sbuf,
                    size_t bytes, int reps, uint32_t& seq) {
  const int peer = 1 - a.rank;
  std::vector<Request> writes(size_t(a.window));
  uint8_t note = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = -1; i < reps; ++i) {
    if (i == 0) t0 = std::chrono::steady_clock::now();
    const uint64_t doneTag = conflux::ofi::makeUserTag(5, seq), ackTag = conflux::ofi::makeUserTag(6, seq);
    ++seq;
    if (a.rank == 0) {
      for (int w = 0; w < a.window; ++w) writes[size_t(w)] = t.iwrite(peer, sbuf.data(), bytes, key, 0);
      check(t.wait(writes));
      Request d = t.isend(peer, doneTag, &note, 1);
      check(t.wait(d));
      Request r = t.irecv(peer, ackTag, &note, 1);
      check(t.wait(r));
    } else {
      Request d = t.irecv(peer, doneTag, &note, 1);
      check(t.wait(d));
      Request s = t.isend(peer, ackTag, &note, 1);
      check(t.wait(s));
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return double(bytes) * a.window * reps / secs / 1e9;
}

int runRank(const Args& a, int listenFd) {
  const int sock = connectPeer(a, listenFd);
  conflux::ofi::Options o;
  o.rank = a.rank;
  o.nranks = 2;
  o.provider = a.provider;
  o.localAddress = a.bind;
  o.rails = a.rails;
  o.chunkBytes = a.chunk;
  o.inflight = a.inflight;
  auto allGather = [&](const std::vector<uint8_t>& mine) {
    std::vector<uint8_t> theirs(mine.size());
    writeAll(sock, mine.data(), mine.size());
    readAll(sock, theirs.data(), theirs.size());
    std::vector<uint8_t> all;
    const auto& first = a.rank == 0 ? mine : theirs;
    const auto& second = a.rank == 0 ? theirs : mine;
    all.insert(all.end(), first.begin(), first.end());
    all.insert(all.end(), second.begin(), second.end());
    return all;
  };
  auto t = Transport::create(o, allGather);
  ::close(sock);
  const auto& caps = t->capabilities();
  const int peer = 1 - a.rank;
  const size_t bufBytes = std::max<size_t>(a.maxBytes, 1);  // --max 0 still exposes a buffer
  std::vector<uint8_t> sbuf(bufBytes, uint8_t(a.rank + 1)), rbuf(bufBytes);
  uint8_t ack = 0;
  // --rma: rank 1 exposes its receive buffer once and sends the key to rank 0.
  conflux::ofi::RemoteKey key;
  if (a.rma) {
    if (caps.rmaWrites == conflux::ofi::RmaVisibility::None) throw std::runtime_error(caps.rmaUnavailable);
    const uint64_t keyTag = conflux::ofi::makeUserTag(4, 0);
    if (a.rank == 1) check(t->exposeMemory(rbuf.data(), rbuf.size(), &key));
    Request k = a.rank == 1 ? t->isend(peer, keyTag, &key, sizeof key) : t->irecv(peer, keyTag, &key, sizeof key);
    check(t->wait(k));
  }
  if (a.rank == 0) {
    std::printf("# conflux-ofi-pingpong provider %s domain %s rails %d chunk %zu inflight %d inject %zu window %d",
                caps.provider.c_str(), caps.domain.c_str(), caps.rails, caps.chunkBytes, caps.inflight,
                caps.injectSize, a.window);
    if (a.rma) std::printf(" rma %s", conflux::ofi::rmaVisibilityName(caps.rmaWrites));
    std::printf("\n# %12s %10s %10s %10s%s\n", "bytes", "lat_us", "bw_GB/s", "iters", a.rma ? "   rma_GB/s" : "");
  }
  uint32_t seq = 0;
  for (size_t bytes = a.minBytes;; bytes = bytes ? bytes * 2 : 1) {
    if (bytes > a.maxBytes) break;
    const size_t budget = size_t(256) << 20;  // bytes moved per measurement, roughly
    const int lat = int(std::max<size_t>(5, std::min<size_t>(2000, budget / 8 / (bytes + 1))));
    const int reps = int(std::max<size_t>(3, std::min<size_t>(200, budget / (bytes * size_t(a.window) + 1))));
    // Latency: ping-pong (one warm-up).
    auto t0 = std::chrono::steady_clock::now();
    for (int i = -1; i < lat; ++i) {
      if (i == 0) t0 = std::chrono::steady_clock::now();
      const uint64_t tag = conflux::ofi::makeUserTag(1, seq++);
      if (a.rank == 0) {
        Request s = t->isend(peer, tag, sbuf.data(), bytes);
        check(t->wait(s));
        Request r = t->irecv(peer, tag, rbuf.data(), bytes);
        check(t->wait(r));
      } else {
        Request r = t->irecv(peer, tag, rbuf.data(), bytes);
        check(t->wait(r));
        Request s = t->isend(peer, tag, sbuf.data(), bytes);
        check(t->wait(s));
      }
    }
    const double latUs = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                         lat / 2;
    // Bandwidth: rank 0 sends a window, rank 1 receives it and acks with one byte.
    std::vector<Request> reqs(size_t(a.window));
    auto t1 = std::chrono::steady_clock::now();
    for (int i = -1; i < reps; ++i) {
      if (i == 0) t1 = std::chrono::steady_clock::now();
      const uint32_t base = seq;
      seq += uint32_t(a.window) + 1;
      for (int w = 0; w < a.window; ++w) {
        const uint64_t tag = conflux::ofi::makeUserTag(2, base + uint32_t(w));
        reqs[size_t(w)] = a.rank == 0 ? t->isend(peer, tag, sbuf.data(), bytes) : t->irecv(peer, tag, rbuf.data(), bytes);
      }
      check(t->wait(reqs));
      const uint64_t ackTag = conflux::ofi::makeUserTag(3, base);
      Request r = a.rank == 0 ? t->irecv(peer, ackTag, &ack, 1) : t->isend(peer, ackTag, &ack, 1);
      check(t->wait(r));
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    const double gbs = double(bytes) * a.window * reps / secs / 1e9;
    const double rmaGbs = a.rma ? rmaBandwidth(a, *t, key, sbuf, bytes, reps, seq) : 0;
    if (a.rank == 0) {
      std::printf("  %12zu %10.2f %10.3f %10d", bytes, latUs, gbs, reps * a.window);
      if (a.rma) std::printf(" %10.3f", rmaGbs);
      std::printf("\n");
    }
    std::fflush(stdout);
    if (bytes == 0 && a.minBytes == 0 && a.maxBytes == 0) break;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  try {
    if (!a.local) return runRank(a, -1);
    // --local: listen on an ephemeral loopback port, fork rank 1.
    a.host = "127.0.0.1";
    if (a.bind.empty()) a.bind = "127.0.0.1";
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 1) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      throw std::runtime_error("cannot listen on loopback");
    }
    a.port = ntohs(sa.sin_port);
    pid_t child = ::fork();
    if (child == 0) {
      ::close(fd);
      a.rank = 1;
      int rc = 1;
      try {
        rc = runRank(a, -1);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank 1: %s\n", e.what());
      }
      std::_Exit(rc);
    }
    a.rank = 0;
    int rc = runRank(a, fd);
    int status = 0;
    ::waitpid(child, &status, 0);
    return rc != 0 ? rc : (WIFEXITED(status) ? WEXITSTATUS(status) : 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", a.rank, e.what());
    return 1;
  }
}
