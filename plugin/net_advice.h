// The opt-in recommendation printer (CONFLUX_PLUGIN_ADVICE=1): what a user might set for NCCL with this
// plugin, worked out from the devices found and the NCCL_* variables already set. It only ever prints:
// the plugin never sets, changes or reads back any NCCL_* variable behind the user's back.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "plugin/net_devices.h"

namespace conflux::plugin {

/// Looks a variable up (getenv in the plugin; a map in tests). Returns nullptr when unset.
using EnvLookup = std::function<const char*(const char* name)>;

/// One line per suggestion or observation, in a fixed order, each starting with the variable it is about.
std::vector<std::string> adviceLines(const std::vector<Device>& devices, const EnvLookup& env);

/// Prints adviceLines to stderr, once per process, when CONFLUX_PLUGIN_ADVICE is true.
void printAdviceIfAsked();

}  // namespace conflux::plugin
