#include "plugin/tuner_rules.h"

#include <strings.h>

#include <array>
#include <charconv>
#include <fstream>
#include <sstream>

#include "plugin/nccl_tuner_abi.h"

namespace conflux::plugin::tuner {
namespace {

constexpr std::array<const char*, abi::kNumTunerColls> kColls = {"broadcast", "reduce", "allgather", "reducescatter",
                                                                 "allreduce"};
constexpr std::array<const char*, abi::kNumAlgorithms> kAlgos = {"tree", "ring", "collnet_direct", "collnet_chain",
                                                                 "nvls", "nvls_tree", "pat"};
constexpr std::array<const char*, abi::kNumProtocols> kProtos = {"ll", "ll128", "simple"};
constexpr int kMaxChannels = 64;  // NCCL's channel limit

/// Index of `word` in `names` (case-insensitive), or -1.
template <size_t N>
int lookup(const std::array<const char*, N>& names, const std::string& word) {
  for (size_t i = 0; i < N; ++i) {
    if (strcasecmp(names[i], word.c_str()) == 0) return int(i);
  }
  return -1;
}

template <size_t N>
std::string choices(const std::array<const char*, N>& names) {
  std::string s;
  for (size_t i = 0; i < N; ++i) s += (i ? ", " : "") + std::string(names[i]);
  return s;
}

/// Parses one non-empty line into `rule`; returns the reason when it is malformed, else "".
std::string parseLine(const std::vector<std::string>& words, Rule& rule) {
  if (words.size() < 5 || words.size() > 6) {
    return "expected '<collective> <minBytes> <maxBytes> <algorithm> <protocol> [nChannels]', got " +
           std::to_string(words.size()) + " fields";
  }
  if (strcasecmp(words[0].c_str(), "any") == 0) {
    rule.coll = -1;
  } else if ((rule.coll = lookup(kColls, words[0])) < 0) {
    return "unknown collective '" + words[0] + "' (" + choices(kColls) + ", any)";
  }
  const auto lo = parseBytes(words[1]);
  const auto hi = parseBytes(words[2]);
  if (!lo) return "bad minBytes '" + words[1] + "' (an integer, optional K/M/G suffix)";
  if (!hi) return "bad maxBytes '" + words[2] + "' (an integer, optional K/M/G suffix)";
  if (*lo > *hi) return "minBytes " + words[1] + " is above maxBytes " + words[2];
  rule.minBytes = *lo;
  rule.maxBytes = *hi;
  if ((rule.algo = lookup(kAlgos, words[3])) < 0) {
    return "unknown algorithm '" + words[3] + "' (" + choices(kAlgos) + ")";
  }
  if ((rule.proto = lookup(kProtos, words[4])) < 0) {
    return "unknown protocol '" + words[4] + "' (" + choices(kProtos) + ")";
  }
  rule.nChannels = 0;
  if (words.size() == 6) {
    int n = 0;
    const auto& w = words[5];
    const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), n);
    if (ec != std::errc() || end != w.data() + w.size() || n < 1 || n > kMaxChannels) {
      return "bad nChannels '" + w + "' (1.." + std::to_string(kMaxChannels) + ")";
    }
    rule.nChannels = n;
  }
  return "";
}

}  // namespace

const char* collName(int coll) { return coll >= 0 && coll < abi::kNumTunerColls ? kColls[coll] : "?"; }
const char* algoName(int algo) { return algo >= 0 && algo < abi::kNumAlgorithms ? kAlgos[algo] : "?"; }
const char* protoName(int proto) { return proto >= 0 && proto < abi::kNumProtocols ? kProtos[proto] : "?"; }

std::optional<size_t> parseBytes(std::string_view text) {
  if (text.empty()) return std::nullopt;
  size_t shift = 0;
  switch (text.back()) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    default: break;
  }
  if (shift != 0) text.remove_suffix(1);
  size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (shift != 0 && value > (SIZE_MAX >> shift)) return std::nullopt;
  return value << shift;
}

std::vector<Rule> loadRules(const std::string& path, const RuleWarning& warn) {
  std::ifstream in(path);
  if (!in) {
    warn("CONFLUX_TUNER_CONFIG " + path + ": cannot read the file; no rules");
    return {};
  }
  return parseRules(in, path, warn);
}

std::vector<Rule> parseRules(std::istream& in, const std::string& path, const RuleWarning& warn) {
  std::vector<Rule> rules;
  std::string line;
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream split(line);
    std::vector<std::string> words;
    for (std::string w; split >> w;) words.push_back(w);
    if (words.empty()) continue;
    Rule rule;
    rule.line = lineNo;
    if (const std::string why = parseLine(words, rule); !why.empty()) {
      warn("CONFLUX_TUNER_CONFIG " + path + ":" + std::to_string(lineNo) + ": " + why + "; line ignored");
      continue;
    }
    rules.push_back(rule);
  }
  return rules;
}

}  // namespace conflux::plugin::tuner
