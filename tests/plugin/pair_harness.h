// Two processes driving a plugin against each other: fork a receiver and a sender, each loads the plugin
// itself (nothing of libfabric crosses fork), with a pipe pair between them for the listen handle and
// phase synchronisation, as NCCL's bootstrap would carry them. With CONFLUX_PLUGIN_TEST_NETNS_RECEIVER and
// _SENDER set, each child first enters that network namespace (tests/netns/test_plugin_netns.py).
#pragma once

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>

namespace conflux::plugintest {

/// Thrown by CHECK in a child; the child prints it and exits 1.
struct CheckFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#define PT_CHECK(cond, ...)                                                                            \
  do {                                                                                                 \
    if (!(cond)) ::conflux::plugintest::fail(__FILE__, __LINE__, #cond, ::conflux::plugintest::format(" " __VA_ARGS__)); \
  } while (0)

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void fail(const char* file, int line, const char* cond, const std::string& msg);

/// One end of the pipe pair between the two children (blocking, with a 60 s limit per call).
class Channel {
 public:
  Channel(int readFd, int writeFd) : in_(readFd), out_(writeFd) {}
  void send(const void* p, size_t n);
  void recv(void* p, size_t n);
  /// Both sides call it; returns when the other side called it too.
  void barrier();

 private:
  int in_, out_;
};

using Role = std::function<void(Channel&)>;

/// Runs `receiver` and `sender` in two forked children; returns "" when both exited 0, else what failed.
std::string runPair(const Role& receiver, const Role& sender, int timeoutSeconds = 120);

/// Open file descriptors of this process (/proc/self/fd).
int openFds();

}  // namespace conflux::plugintest
