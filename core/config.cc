#include "core/config.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace conflux::config {

const std::vector<VarInfo>& all() {
  static const std::vector<VarInfo> vars = {
#define X(name, def, doc) {"CONFLUX_" #name, def, doc},
#include "core/config_vars.def"
#undef X
  };
  return vars;
}

const VarInfo& info(Var v) { return all().at(static_cast<size_t>(v)); }

std::string getString(Var v) {
  const VarInfo& i = info(v);
  const char* value = std::getenv(i.name);
  if (value == nullptr || *value == '\0') return i.defaultValue;
  return value;
}

int64_t getInt(Var v) {
  std::string s = getString(v);
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(s.c_str(), &end, 0);
  if (errno != 0 || end == s.c_str() || *end != '\0') {
    throw Error(Code::InvalidArgument, std::string(info(v).name) + "='" + s + "' is not an integer");
  }
  return x;
}

bool getBool(Var v) {
  std::string s = getString(v);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s == "1" || s == "true" || s == "yes" || s == "on";
}

std::string describeAll() {
  std::ostringstream out;
  for (const VarInfo& i : all()) {
    const char* value = std::getenv(i.name);
    out << i.name << "=" << (value ? value : i.defaultValue) << (value ? "" : " (default)") << "\n    "
        << i.doc << "\n";
  }
  return out.str();
}

}  // namespace conflux::config
