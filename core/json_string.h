// JSON string literals for the hand-written JSON of the flight recorder's dumps and the metrics'
// /status (neither links a JSON library: they are written while a process may be failing).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace conflux {

/// Appends `s` as a JSON string literal (quoted, with quotes, backslashes and control characters escaped).
inline void appendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

}  // namespace conflux
