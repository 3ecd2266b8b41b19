// conflux-ofi-pingpong: latency (half round trip) and bandwidth (a window of messages, then an ack)
// between two processes over conflux::ofi::Transport. With --rma, also the bandwidth of RMA writes: rank 1
// exposes its buffer once and sends the key; rank 0 writes a window, sends a 1-byte "done", rank 1 acks. Addresses are exchanged through one TCP connection:
// rank 0 listens on --addr host:port, rank 1 connects to it. --local forks both ranks on 127.0.0.1.
//
//   conflux-ofi-pingpong --rank 0 --addr 10.200.0.1:5555 --bind 10.200.0.1     (node A)
//   conflux-ofi-pingpong --rank 1 --addr 10.200.0.1:5555 --bind 10.200.0.2     (node B)
//   conflux-ofi-pingpong --local [--min 8] [--max 67108864] [--window 16] [--rails 2] [--rma]
#include <arpa/inet.h>
#include <getopt.h>
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

#include "core/cli_numbers.h"
#include "transport/ofi/transport.h"

namespace {

namespace cli = conflux::cli;
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

constexpr char kUsage[] =
    "usage: conflux-ofi-pingpong (--rank 0|1 --addr HOST:PORT | --local) [--bind ADDR] [--provider P]\n"
    "       [--min BYTES] [--max BYTES] [--window N] [--rails N] [--chunk BYTES] [--inflight N] [--rma]\n";

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "conflux-ofi-pingpong: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

[[noreturn]] void bad(const std::string& flag, const std::string& value, const char* takes) {
  usage(flag + ": '" + value + "' is not " + takes);
}

Args parse(int argc, char** argv) {
  enum { kRank = 256, kAddr, kBind, kProvider, kMin, kMax, kWindow, kRails, kChunk, kInflight, kLocal, kRma, kHelp };
  static const option kOptions[] = {
      {"rank", required_argument, nullptr, kRank},         {"addr", required_argument, nullptr, kAddr},
      {"bind", required_argument, nullptr, kBind},         {"provider", required_argument, nullptr, kProvider},
      {"min", required_argument, nullptr, kMin},           {"max", required_argument, nullptr, kMax},
      {"window", required_argument, nullptr, kWindow},     {"rails", required_argument, nullptr, kRails},
      {"chunk", required_argument, nullptr, kChunk},       {"inflight", required_argument, nullptr, kInflight},
      {"local", no_argument, nullptr, kLocal},             {"rma", no_argument, nullptr, kRma},
      {"help", no_argument, nullptr, kHelp},               {nullptr, 0, nullptr, 0},
  };
  Args a;
  opterr = 0;
  for (;;) {
    int index = -1;
    const int c = getopt_long(argc, argv, "+:", kOptions, &index);
    if (c == -1) break;
    const std::string flag = index >= 0 ? std::string("--") + kOptions[index].name
                                        : optind > 0 && optind <= argc ? argv[optind - 1] : "?";
    const std::string v = optarg != nullptr ? optarg : "";
    uint64_t bytes = 0;
    switch (c) {
      case kRank:
        if (!cli::parseInt(v, 0, 1, &a.rank)) bad(flag, v, "0 or 1");
        break;
      case kAddr: {
        const auto colon = v.rfind(':');
        if (colon == std::string::npos || colon == 0 || !cli::parseInt(v.substr(colon + 1), 1, 65535, &a.port)) {
          bad(flag, v, "HOST:PORT with a port from 1 to 65535");
        }
        a.host = v.substr(0, colon);
        break;
      }
      case kBind: a.bind = v; break;
      case kProvider: a.provider = v; break;
      case kMin:
      case kMax:
      case kChunk:
        if (!cli::parseSize(v, &bytes)) bad(flag, v, "a size such as 0, 8, 64K or 32M");
        (c == kMin ? a.minBytes : c == kMax ? a.maxBytes : a.chunk) = bytes;
        break;
      case kWindow:
        if (!cli::parseInt(v, 1, 1 << 16, &a.window)) bad(flag, v, "a window of 1 to 65536 messages");
        break;
      case kRails:
        if (!cli::parseInt(v, 0, 64, &a.rails)) bad(flag, v, "a number of rails from 0 (one per domain) to 64");
        break;
      case kInflight:
        if (!cli::parseInt(v, 0, 1 << 16, &a.inflight)) bad(flag, v, "a count >= 0 (0: the default)");
        break;
      case kLocal: a.local = true; break;
      case kRma: a.rma = true; break;
      case kHelp: std::fputs(kUsage, stdout); std::exit(0);
      case ':': usage(flag + " needs a value");
      default: usage("unknown flag " + flag);
    }
  }
  if (optind < argc) usage(std::string("unexpected argument '") + argv[optind] + "'");
  if (!a.local && (a.rank < 0 || a.port <= 0)) usage("give --rank and --addr, or --local");
  if (a.minBytes > a.maxBytes) usage("--min is larger than --max");
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
