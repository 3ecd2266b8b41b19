// The tuner's rules file (CONFLUX_TUNER_CONFIG): lines that pin NCCL's algorithm and protocol (and
// optionally the channel count) for a collective and a range of message sizes, ahead of the cost model.
#pragma once

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conflux::plugin::tuner {

/// One rule: for `coll` (an NCCL collType, or -1 for any) and minBytes <= nBytes <= maxBytes, prefer
/// cost table entry [algo][proto] and, when nChannels > 0, that many channels.
struct Rule {
  int coll = -1;
  size_t minBytes = 0;
  size_t maxBytes = 0;
  int algo = 0;
  int proto = 0;
  int nChannels = 0;  ///< 0: leave NCCL's choice
  int line = 0;       ///< line of the file, for logs
};

/// Called with a message about a line that was ignored ("path:line: why").
using RuleWarning = std::function<void(const std::string&)>;

/// Parses the rules file at `path`. Format, one rule a line, '#' starts a comment:
///   <collective> <minBytes> <maxBytes> <algorithm> <protocol> [nChannels]
/// collective: broadcast, reduce, allgather, reducescatter, allreduce or any; bytes: an integer with an
/// optional K, M or G suffix (powers of 1024); algorithm: tree, ring, collnet_direct, collnet_chain, nvls,
/// nvls_tree, pat; protocol: ll, ll128, simple; nChannels: 1..64. Names are case-insensitive. A bad line
/// is reported through `warn` (naming the file and line) and skipped; an unreadable file is one warning
/// and no rules.
std::vector<Rule> loadRules(const std::string& path, const RuleWarning& warn);
/// loadRules' parser, reading `in` (`path` names it in the warnings).
std::vector<Rule> parseRules(std::istream& in, const std::string& path, const RuleWarning& warn);

/// Name of an NCCL collType / algorithm / protocol ("allreduce", "tree", "ll128"), "?" when out of range.
const char* collName(int coll);
const char* algoName(int algo);
const char* protoName(int proto);

/// Parses "1048576", "64K", "1M", "1G" (powers of 1024); nullopt when malformed or out of range.
std::optional<size_t> parseBytes(std::string_view text);

}  // namespace conflux::plugin::tuner
