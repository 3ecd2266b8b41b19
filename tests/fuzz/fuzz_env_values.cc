// The values Conflux reads from its environment: the launchers' variables (rank, size, local rank, job
// ids of Open MPI, PMIx, PMI, Slurm, torchrun; core/bootstrap/launcher_env.h), CONFLUX_ALGO's rules, the
// addresses (CONFLUX_BOOTSTRAP_ADDR, CONFLUX_METRICS_ADDR), CONFLUX_SECRET, cpu lists, and every
// CONFLUX_* integer and switch. A bad value must be an Error naming its variable, never a crash.
//
// Input: lines NAME=VALUE. The launcher detection sees exactly these variables (an injected lookup);
// the CONFLUX_* ones are also set in the process environment for config::getInt/getBool, and removed
// after.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/selector.h"
#include "core/bootstrap/crypto.h"
#include "core/bootstrap/launcher_env.h"
#include "core/bootstrap/socket.h"
#include "core/cli_numbers.h"
#include "core/config.h"
#include "core/error.h"
#include "core/metrics/service.h"
#include "core/topology/topology.h"

using namespace conflux;

namespace {

/// Runs `f`; an Error is the right way to refuse a value, but it must name `variable`.
template <class F>
void refusedWithError(F&& f, const std::string& variable) {
  try {
    f();
  } catch (const Error& e) {
    if (!variable.empty() && std::strstr(e.what(), variable.c_str()) == nullptr) {
      std::fprintf(stderr, "an error that does not name %s: %s\n", variable.c_str(), e.what());
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> env;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0 || line.find('\0') != std::string::npos) continue;
    env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  const bootstrap::EnvLookup lookup = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  refusedWithError([&] {
    if (const auto li = bootstrap::detectLauncher(lookup)) {
      if (li->rank < 0 || li->size < 1 || li->rank >= li->size) std::abort();  // accepted out of range
    }
  }, "");  // it names whichever launcher variable is wrong
  for (const auto& entry : env) {
    const std::string& name = entry.first;  // (clang 14 lambdas cannot capture structured bindings)
    const std::string& value = entry.second;
    refusedWithError([&] {
      const Selector s(value);
      for (int c = 0; c < kNumCollectives; ++c) (void)s.forced(static_cast<Collective>(c));
    }, "CONFLUX_ALGO");
    refusedWithError([&] { (void)bootstrap::splitHostPort(value, name); }, name);
    refusedWithError([&] { (void)metrics::parseHttpAddress(value); }, "CONFLUX_METRICS_ADDR");
    refusedWithError([&] { (void)topo::parseCpuList(value); }, "");  // it quotes the text instead
    uint8_t secret[32];
    (void)bootstrap::fromHex(value, secret, sizeof secret);
    long long i = 0;
    uint64_t bytes = 0;
    double d = 0;
    (void)cli::parseInt(value, -1000000LL, 1000000LL, &i);
    (void)cli::parseSize(value, &bytes);
    (void)cli::parseDouble(value, 0.0, &d);
  }
  std::vector<std::string> set;
  for (const auto& [name, value] : env) {
    if (name.rfind("CONFLUX_", 0) == 0 && ::setenv(name.c_str(), value.c_str(), 1) == 0) set.push_back(name);
  }
  for (const config::VarInfo& v : config::all()) {
    const auto var = static_cast<config::Var>(&v - config::all().data());
    refusedWithError([&] { (void)config::getInt(var); }, v.name);
    (void)config::getBool(var);
  }
  for (const std::string& name : set) ::unsetenv(name.c_str());
  return 0;
}
