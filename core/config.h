// One registry of CONFLUX_* environment variables (declared in config_vars.def).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace conflux::config {

enum class Var : int {
#define X(name, def, doc) name,
#include "core/config_vars.def"
#undef X
  Count
};

struct VarInfo {
  const char* name;          ///< Full variable name, e.g. "CONFLUX_TIMEOUT_MS".
  const char* defaultValue;
  const char* doc;
};

const VarInfo& info(Var v);
const std::vector<VarInfo>& all();

/// Value from the environment, or the default when unset or empty.
std::string getString(Var v);
/// Integer value; throws Error(InvalidArgument) naming the variable when it does not parse.
int64_t getInt(Var v);
/// True for 1/true/yes/on (any case).
bool getBool(Var v);

/// Text listing every variable with its current value, default and doc (for `conflux-info --env`).
std::string describeAll();

}  // namespace conflux::config
