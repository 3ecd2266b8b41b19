// The opt-in recommendation printer (CONFLUX_PLUGIN_ADVICE): a child process loads the plugin and calls
// init with its stderr on a pipe. With the variable set, the suggestions appear (NCCL_NET first when it
// is unset); without it, nothing is printed; either way no NCCL_* variable differs after init.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
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

/// Forks; the child sets `advice` (or leaves it unset), loads the plugin, runs init and exits 0 when
/// NCCL_* are what they were before init (3 when not, 2 when init failed).
ChildResult initInChild(const char* advice) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    ::setenv("CONFLUX_OFI_DOMAINS", "lo", 1);
    ::unsetenv("NCCL_NET");
    ::unsetenv("NCCL_TUNER_PLUGIN");
    ::setenv("NCCL_DEBUG", "WARN", 1);
    if (advice != nullptr) ::setenv("CONFLUX_PLUGIN_ADVICE", advice, 1);
    else ::unsetenv("CONFLUX_PLUGIN_ADVICE");
    const auto before = ncclVariables();
    int code = 2;
    try {
      auto net = conflux::plugin::loadNet(CONFLUX_PLUGIN_PATH, 9);
      if (net->init(nullptr) == 0) code = ncclVariables() == before ? 0 : 3;
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

}  // namespace
}  // namespace conflux::plugintest
