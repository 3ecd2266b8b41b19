#include "plugin/net_advice.h"

#include <strings.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "core/config.h"

namespace conflux::plugin {
namespace {

bool equalsIgnoringCase(const char* a, const char* b) { return a != nullptr && strcasecmp(a, b) == 0; }

}  // namespace

std::vector<std::string> adviceLines(const std::vector<Device>& devices, const EnvLookup& env) {
  std::vector<std::string> out;
  const char* net = env("NCCL_NET");
  if (net == nullptr) {
    out.push_back("NCCL_NET=Conflux: makes NCCL use this plugin or fail; unset, NCCL falls back to its own "
                  "transports quietly when the plugin cannot start");
  } else if (!equalsIgnoringCase(net, "Conflux")) {
    out.push_back(std::string("NCCL_NET is '") + net + "': NCCL will not pick this plugin (its name is Conflux)");
  }
  if (env("NCCL_TUNER_PLUGIN") == nullptr) {
    out.push_back("NCCL_TUNER_PLUGIN: unset, so NCCL finds Conflux's tuner inside this library; set it to "
                  "'conflux' to load libnccl-tuner-conflux.so by name, or to 'none' to keep NCCL's own tuning");
  }
  out.push_back("NCCL_NET_GDR_LEVEL: no effect with this plugin for now: its provider offers no FI_HMEM, so "
                "NCCL stages GPU buffers through host memory");
  if (devices.size() > 1) {
    std::string names;
    for (const Device& d : devices) names += (names.empty() ? "" : ",") + d.name;
    out.push_back("NCCL_NET_MERGE_LEVEL: " + std::to_string(devices.size()) + " devices (" + names +
                  "); NCCL 2.24+ can group the NICs near a GPU into one virtual device (makeVDevice), whose "
                  "connections then alternate between them");
  }
  if (env("NCCL_SOCKET_IFNAME") == nullptr && !devices.empty() && devices[0].name.find(':') == std::string::npos) {
    out.push_back("NCCL_SOCKET_IFNAME=" + devices[0].name + ": NCCL's bootstrap then uses the same network "
                  "as the plugin's first device (only where that device is an IP interface)");
  }
  if (env("NCCL_DEBUG") == nullptr) {
    out.push_back("NCCL_DEBUG=INFO: NCCL then logs 'Using network Conflux', to confirm the plugin is in use");
  }
  return out;
}

void printAdviceIfAsked() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!config::getBool(config::Var::PLUGIN_ADVICE)) return;
    const std::vector<std::string> lines = adviceLines(devices(), [](const char* name) { return std::getenv(name); });
    std::fprintf(stderr, "conflux: suggestions for NCCL with this plugin (printed because CONFLUX_PLUGIN_ADVICE "
                         "is set; nothing was changed):\n");
    for (const std::string& line : lines) std::fprintf(stderr, "conflux:   %s\n", line.c_str());
  });
}

}  // namespace conflux::plugin
