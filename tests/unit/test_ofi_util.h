// Helpers for the libfabric transport tests: ranks as threads of this process (addresses exchanged through
// an in-process all-gather) or as forked processes (addresses exchanged over a socketpair), byte patterns,
// and a check macro for children. Everything runs on 127.0.0.1 with tcp;ofi_rxm unless told otherwise.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/child_processes.h"
#include "tests/unit/thread_group.h"
#include "transport/ofi/transport.h"

/// In a child process: prints the failed condition and exits with status 3.
#define OFI_CHECK(cond)                                                                         \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "[pid %d] %s:%d: check failed: %s\n", int(::getpid()), __FILE__, __LINE__, \
                   #cond);                                                                      \
      std::fflush(stderr);                                                                      \
      ::_exit(3);                                                                               \
    }                                                                                           \
  } while (0)

namespace ofitest {

using conflux::ofi::Options;
using conflux::ofi::Request;
using conflux::ofi::Transport;
using namespace std::chrono_literals;

inline Options loopbackOptions(int rank, int nranks) {
  Options o;
  o.rank = rank;
  o.nranks = nranks;
  o.provider = "tcp;ofi_rxm";
  o.localAddress = "127.0.0.1";
  o.timeout = std::chrono::milliseconds(60000);
  return o;
}

/// Byte i of a message from `src` with `salt`.
inline uint8_t patternByte(int src, uint32_t salt, size_t i) {
  return uint8_t((i * 131u + size_t(src) * 17u + salt * 7u + (i >> 13)) & 0xffu);
}
inline void fillPattern(std::vector<uint8_t>& buf, int src, uint32_t salt) {
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = patternByte(src, salt, i);
}
/// Index of the first wrong byte, or -1.
inline long long firstMismatch(const std::vector<uint8_t>& buf, size_t bytes, int src, uint32_t salt) {
  for (size_t i = 0; i < bytes; ++i)
    if (buf[i] != patternByte(src, salt, i)) return (long long)i;
  return -1;
}

using conflux::testing::ThreadGroup;

/// Runs body(rank, transport, group) in `n` threads, each with its own Transport on 127.0.0.1.
inline void runThreads(int n, const std::function<void(Options&)>& tweak,
                       const std::function<void(int, Transport&, ThreadGroup&)>& body) {
  ThreadGroup group(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Options o = loopbackOptions(r, n);
      if (tweak) tweak(o);
      std::unique_ptr<Transport> t;
      try {
        t = Transport::create(o, [&](const std::vector<uint8_t>& mine) { return group.allGather(r, mine); });
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": create failed: " << e.what();
        return;
      }
      body(r, *t, group);
      group.barrier();  // nobody closes while a peer still talks to it
    });
  }
  for (auto& th : threads) th.join();
}

/// Forks two rank processes (tests/common/child_processes.h) that exchange addresses over a socketpair and
/// run body(rank, allGather). Returns each child's exit code (-signal when killed, -1000 when it outlived
/// `limit` and was killed); what a failed child reported is printed.
inline std::vector<int> runForked(const std::function<int(int, const conflux::ofi::AllGather&)>& body,
                                  std::chrono::seconds limit = 100s) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) std::abort();
  conflux::testing::ChildProcesses children(2);
  children.start([&](int rank) {
    const int fd = sv[rank];
    ::close(sv[1 - rank]);
    auto allGather = [fd, rank](const std::vector<uint8_t>& mine) {
      std::vector<uint8_t> theirs(mine.size());
      if (::write(fd, mine.data(), mine.size()) != ssize_t(mine.size())) ::_exit(4);
      size_t got = 0;
      while (got < theirs.size()) {
        ssize_t n = ::read(fd, theirs.data() + got, theirs.size() - got);
        if (n <= 0) ::_exit(4);
        got += size_t(n);
      }
      std::vector<uint8_t> all = rank == 0 ? mine : theirs;
      const auto& second = rank == 0 ? theirs : mine;
      all.insert(all.end(), second.begin(), second.end());
      return all;
    };
    return body(rank, allGather);
  });
  ::close(sv[0]);
  ::close(sv[1]);
  std::vector<int> codes;
  for (const conflux::testing::ChildOutcome& o : children.waitAll(limit)) {
    if (!o.failure.empty()) std::fprintf(stderr, "%s\n", o.describe().c_str());
    codes.push_back(o.timedOut ? -1000 : o.signal != 0 ? -o.signal : o.exitCode);
  }
  return codes;
}

}  // namespace ofitest
