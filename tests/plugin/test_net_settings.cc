// What the plugin takes from Conflux's own settings at init, each checked in a child process that loads
// the plugin with its stderr on a pipe:
//  - the opt-in recommendation printer (CONFLUX_PLUGIN_ADVICE): with the variable set, the suggestions
//    appear (NCCL_NET first when it is unset); without it, nothing is printed; either way no NCCL_*
//    variable differs after init;
//  - the devices' latency property: inter_alpha_us of CONFLUX_COST_FILE, else 0 (unknown).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>

#include "plugin/net_loader.h"

extern char** environ;

namespace conflux::plugintest {
namespace {

std::map<std::string, std::string> ncclVariables() {
  std::map<std::string, std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "NCCL_", 5) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    out[std::string(*e, eq != nullptr ? size_t(eq - *e) : std::strlen(*e))] = eq != nullptr ? eq + 1 : "";
  }
  return out;
}

struct ChildResult {
  int status = -1;
  std::string stderrText;
};

/// Forks; the child runs `body` with its stderr on a pipe and exits with what it returns.
ChildResult inChild(const std::function<int()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    ::setenv("CONFLUX_OFI_DOMAINS", "lo", 1);
    int code = 2;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
    }
    std::fflush(stderr);
    ::_exit(code);
  }
  ::close(fds[1]);
  ChildResult r;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) r.stderrText.append(buf, size_t(n));
  ::close(fds[0]);
  ::waitpid(pid, &r.status, 0);
  return r;
}

/// The child sets `advice` (or leaves it unset), loads the plugin, runs init and exits 0 when NCCL_* are
/// what they were before init (3 when not, 2 when init failed).
ChildResult initInChild(const char* advice) {
  return inChild([advice] {
    ::unsetenv("NCCL_NET");
    ::unsetenv("NCCL_TUNER_PLUGIN");
    ::setenv("NCCL_DEBUG", "WARN", 1);
    if (advice != nullptr) ::setenv("CONFLUX_PLUGIN_ADVICE", advice, 1);
    else ::unsetenv("CONFLUX_PLUGIN_ADVICE");
    const auto before = ncclVariables();
    auto net = conflux::plugin::loadNet(CONFLUX_PLUGIN_PATH, 9);
    if (net->init(nullptr) != 0) return 2;
    return ncclVariables() == before ? 0 : 3;
  });
}

/// The latency property of device 0 in tenths of a microsecond (as an exit status, so below 25.5 us) with `costFile` (or none).
ChildResult latencyInChild(const char* costFile) {
  return inChild([costFile] {
    if (costFile != nullptr) ::setenv("CONFLUX_COST_FILE", costFile, 1);
    else ::unsetenv("CONFLUX_COST_FILE");
    auto net = conflux::plugin::loadNet(CONFLUX_PLUGIN_PATH, 11);
    conflux::plugin::abi::PropertiesV11 p{};
    if (net->init(nullptr) != 0 || net->properties(0, &p) != 0) return 255;
    net->finalize();
    return int(p.latency * 10 + 0.5f);
  });
}

TEST(PluginAdvice, PrintedOnlyWhenAskedAndNothingIsSet) {
  const ChildResult asked = initInChild("1");
  ASSERT_TRUE(WIFEXITED(asked.status)) << asked.stderrText;
  EXPECT_EQ(WEXITSTATUS(asked.status), 0) << "init failed (2) or changed an NCCL_* variable (3):\n" << asked.stderrText;
  EXPECT_NE(asked.stderrText.find("nothing was changed"), std::string::npos) << asked.stderrText;
  EXPECT_NE(asked.stderrText.find("conflux:   NCCL_NET=Conflux"), std::string::npos) << asked.stderrText;
  EXPECT_NE(asked.stderrText.find("NCCL_TUNER_PLUGIN"), std::string::npos) << asked.stderrText;
  EXPECT_EQ(asked.stderrText.find("NCCL_DEBUG=INFO"), std::string::npos) << "NCCL_DEBUG was set:\n" << asked.stderrText;

  const ChildResult quiet = initInChild(nullptr);
  ASSERT_TRUE(WIFEXITED(quiet.status));
  EXPECT_EQ(WEXITSTATUS(quiet.status), 0) << quiet.stderrText;
  EXPECT_EQ(quiet.stderrText, "") << "nothing is printed unless CONFLUX_PLUGIN_ADVICE is set";
}

TEST(PluginProperties, LatencyFromTheCostFileElseUnknown) {
  char path[] = "/tmp/conflux-cost-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << "# measured between two nodes\ninter_alpha_us=12.5\ninter_gbytes_per_s=45\n";
  const ChildResult measured = latencyInChild(path);
  ASSERT_TRUE(WIFEXITED(measured.status)) << measured.stderrText;
  EXPECT_EQ(WEXITSTATUS(measured.status), 125) << "latency in 0.1 us from inter_alpha_us=12.5\n" << measured.stderrText;
  std::ofstream(path) << "inter_gbytes_per_s=45\n";  // no latency in the file
  const ChildResult absent = latencyInChild(path);
  ASSERT_TRUE(WIFEXITED(absent.status)) << absent.stderrText;  // a signal must not read as latency 0
  EXPECT_EQ(WEXITSTATUS(absent.status), 0) << absent.stderrText;
  ::unlink(path);
  const ChildResult none = latencyInChild(nullptr);
  ASSERT_TRUE(WIFEXITED(none.status)) << none.stderrText;
  EXPECT_EQ(WEXITSTATUS(none.status), 0) << none.stderrText;
}

}  // namespace
}  // namespace conflux::plugintest
