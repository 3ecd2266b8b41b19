// Numbers on the command lines of our tools (conflux-perf, conflux-sim, conflux-ofi-pingpong): the whole
// text must be the number, so "12x" or "" is refused rather than read as 12 or 0. Callers report the
// refusal with the flag's name and what it takes.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace conflux::cli {

/// An integer in [lo, hi] (decimal, or 0x-prefixed hex).
inline bool parseInt(const std::string& text, long long lo, long long hi, long long* out) {
  errno = 0;
  char* end = nullptr;
  const bool hex = text.size() > 1 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  const long long v = std::strtoll(text.c_str(), &end, hex ? 16 : 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

/// parseInt into an int.
inline bool parseInt(const std::string& text, int lo, int hi, int* out) {
  long long v = 0;
  if (!parseInt(text, static_cast<long long>(lo), static_cast<long long>(hi), &v)) return false;
  *out = static_cast<int>(v);
  return true;
}

/// A finite number >= lo.
inline bool parseDouble(const std::string& text, double lo, double* out) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || *end != '\0' || !(v >= lo) || v > 1e300) return false;
  *out = v;
  return true;
}

/// A byte count: a number with an optional K, M or G suffix (powers of 1024, either case), up to 1e18.
inline bool parseSize(const std::string& text, uint64_t* bytes) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || !(v >= 0)) return false;
  double unit = 1;
  switch (*end) {
    case '\0': break;
    case 'K': case 'k': unit = 1024.0; ++end; break;
    case 'M': case 'm': unit = 1024.0 * 1024; ++end; break;
    case 'G': case 'g': unit = 1024.0 * 1024 * 1024; ++end; break;
    default: return false;
  }
  if (*end != '\0' || v * unit > 1e18) return false;
  *bytes = static_cast<uint64_t>(v * unit);
  return true;
}

}  // namespace conflux::cli
