// conflux-trace's reasoning over the ranks' dumps; see trace_analysis.h.
//
// Per communicator (dumps grouped by comm.id; ranks whose rings hold no collectives take no part):
//   1. each rank's last completed collective (sequence numbers are the same call on every rank);
//   2. lastCommon = the smallest of them; when some rank completed more, or is inside a call, the
//      ranks diverged at lastCommon + 1: each rank is then completed / in it (started, failed, with the
//      peer it last waited for) / not joined / without a dump;
//   3. the first sequence number the ranks recorded with different arguments (a mismatch);
//   4. suspects, scored: a rank that never joined the divergent call (4), one on the smaller side of a
//      mismatch (3), one that wrote no dump (2), the rank where a chain of waits ends (1 per rank whose
//      chain ends there), the rank the first error names (1);
//   5. the network, when every waiting rank waits across nodes (directly or through its node's ranks).
#include "tools/trace/trace_analysis.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

namespace conflux::trace {
namespace {

std::string ranksText(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) {
    if (!s.empty()) s += ' ';
    s += std::to_string(r);
  }
  return s;
}

std::string plural(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + ranksText(ranks);
}

std::string utcTime(int64_t ns) {
  const std::time_t secs = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.%03d UTC", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>((ns / 1000000) % 1000));
  return buf;
}

// One rank's collectives, indexed by sequence number.
struct RankView {
  const RankDump* dump = nullptr;
  std::map<uint64_t, const Call*> bySeq;
  uint64_t lastCompleted = 0;  // 0: none completed among those recorded
  bool known() const { return !bySeq.empty(); }  // it recorded collectives (not only point-to-point)
  uint64_t first() const { return bySeq.begin()->first; }
  uint64_t last() const { return bySeq.rbegin()->first; }
  const Call* at(uint64_t seq) const {
    auto it = bySeq.find(seq);
    return it == bySeq.end() ? nullptr : it->second;
  }
};

RankView viewOf(const RankDump& d) {
  RankView v;
  v.dump = &d;
  for (const Call& c : d.calls) {
    if (c.p2p) continue;
    v.bySeq[c.seq] = &c;
    if (c.state == "completed") v.lastCompleted = std::max(v.lastCompleted, c.seq);
  }
  return v;
}

// Step 3: the first call recorded with different arguments, and the ranks on its smaller sides.
void findMismatch(const std::map<int, RankView>& views, CommReport& rep, std::vector<int>& minority) {
  uint64_t from = 0, to = 0;
  for (const auto& [r, v] : views) {
    if (!v.known()) continue;
    from = std::max(from, v.first());
    to = std::max(to, v.last());
  }
  for (uint64_t seq = std::max<uint64_t>(from, 1); seq <= to; ++seq) {
    std::map<std::string, std::vector<int>> bySignature;
    for (const auto& [r, v] : views) {
      if (const Call* c = v.at(seq)) bySignature[c->signature()].push_back(r);
    }
    if (bySignature.size() < 2) continue;
    rep.mismatch = "call #" + std::to_string(seq) + ":";
    size_t largest = 0;
    for (const auto& [sig, ranks] : bySignature) largest = std::max(largest, ranks.size());
    bool first = true;
    for (const auto& [sig, ranks] : bySignature) {
      rep.mismatch += std::string(first ? " " : "; ") + plural(ranks) + " called " + sig;
      first = false;
    }
    // On a tie every side is suspect; otherwise the ranks outside the largest group.
    const bool tie = std::count_if(bySignature.begin(), bySignature.end(),
                                   [&](const auto& kv) { return kv.second.size() == largest; }) > 1;
    for (const auto& [sig, ranks] : bySignature) {
      if (tie || ranks.size() < largest) minority.insert(minority.end(), ranks.begin(), ranks.end());
    }
    return;
  }
}

// Where a chain of waits at the divergent call ends: follows each waiting rank's peer while that peer
// waits too; -1 when the chain loops (ranks waiting on one another, as across a cut link).
int endOfWaits(const std::vector<RankAt>& ranks, int from) {
  int cur = from;
  for (size_t step = 0; step <= ranks.size(); ++step) {
    const int next = ranks[cur].waitPeer;
    if (next < 0) return cur;
    cur = next;
  }
  return -1;
}

// Step 5: nobody is missing or behind, and every rank that waits does so across nodes, directly or
// through ranks of its own node that do (a rank that never blocked is neutral).
std::string networkSuspect(const CommReport& rep, const std::map<int, RankView>& views) {
  if (rep.divergedAt == 0 || !rep.missing.empty()) return "";
  std::set<int> nodes;
  for (const RankAt& at : rep.ranks) {
    if (at.state == "not joined" || at.state == "no calls recorded") return "";
    if (at.state == "completed" || at.waitPeer < 0) continue;
    int cur = at.rank;
    bool reached = false;
    for (int step = 0; step < rep.nranks && !reached; ++step) {
      const int peer = rep.ranks[cur].waitPeer;
      if (peer < 0) break;
      const int here = views.at(cur).dump->node, there = views.at(peer).dump->node;
      if (here != there) {
        nodes.insert(here);
        nodes.insert(there);
        reached = true;
      }
      cur = peer;
    }
    if (!reached) return "";
  }
  if (nodes.size() < 2) return "";
  return "every rank in call #" + std::to_string(rep.divergedAt) +
         " waits for a rank on another node: suspect the network between nodes " +
         ranksText(std::vector<int>(nodes.begin(), nodes.end()));
}

CommReport analyzeComm(const std::vector<const RankDump*>& dumps) {
  CommReport rep;
  rep.commId = dumps.front()->commId;
  rep.name = dumps.front()->commName;
  std::set<int> sizes;
  for (const RankDump* d : dumps) sizes.insert(d->nranks);
  rep.nranks = *sizes.rbegin();
  if (sizes.size() > 1) {
    rep.conflict = "the dumps disagree on the communicator's size (" +
                   ranksText(std::vector<int>(sizes.begin(), sizes.end())) + " ranks): are they of one job?";
  }
  std::map<int, const RankDump*> byRank;
  for (const RankDump* d : dumps) {
    auto [it, fresh] = byRank.emplace(d->rank, d);
    if (!fresh && d->writtenNs > it->second->writtenNs) it->second = d;  // the newest dump of a rank
  }
  std::map<int, RankView> views;
  bool allSignal = true;
  for (int r = 0; r < rep.nranks; ++r) {
    auto it = byRank.find(r);
    if (it == byRank.end()) {
      rep.missing.push_back(r);
      continue;
    }
    rep.dumped.push_back(r);
    views.emplace(r, viewOf(*it->second));
    allSignal &= it->second->reason == "signal" || it->second->reason == "status";  // live views
  }

  // Steps 1 and 2, over the ranks that recorded collectives.
  uint64_t lowest = UINT64_MAX, highest = 0;
  bool inFlight = false, anyKnown = false;
  for (const auto& [r, v] : views) {
    if (!v.known()) continue;
    anyKnown = true;
    lowest = std::min(lowest, v.lastCompleted);
    highest = std::max(highest, v.lastCompleted);
    inFlight |= v.last() > v.lastCompleted;
  }
  rep.lastCommon = anyKnown ? lowest : 0;
  if (anyKnown && (lowest != highest || inFlight)) rep.divergedAt = lowest + 1;
  if (rep.divergedAt != 0 && allSignal) {
    rep.note = "every dump was taken live (SIGUSR1 or /status), not at one moment: ranks a call apart may just be in flight";
  }

  for (int r = 0; r < rep.nranks; ++r) {
    RankAt at;
    at.rank = r;
    auto it = views.find(r);
    if (it == views.end()) {
      at.state = "no dump";
    } else if (!it->second.known()) {
      at.state = "no calls recorded";  // only point-to-point batches in its ring: nothing to compare
    } else {
      const RankView& v = it->second;
      at.lastCompleted = v.lastCompleted;
      const Call* c = rep.divergedAt != 0 ? v.at(rep.divergedAt) : nullptr;
      if (rep.divergedAt == 0 || v.lastCompleted >= rep.divergedAt) {
        at.state = "completed";
      } else if (c == nullptr) {
        at.state = "not joined";
      } else {
        at.state = c->state;
        if (c->waitRound > 0 && c->waitPeer >= 0 && c->waitPeer < rep.nranks && c->waitPeer != r) {
          at.waitPeer = c->waitPeer;
          at.waitRound = c->waitRound;
        }
      }
      if (c != nullptr && rep.divergedCall.empty()) {
        rep.divergedCall = c->signature() + (c->algorithm.empty() ? "" : ", " + c->algorithm);
      }
    }
    rep.ranks.push_back(at);
  }

  std::vector<int> minority;
  findMismatch(views, rep, minority);
  rep.network = networkSuspect(rep, views);

  for (const auto& [r, v] : views) {
    const RankDump* d = v.dump;
    if (d->error && (!rep.firstError || d->error->timeNs < rep.firstError->timeNs)) {
      rep.firstError = d->error;
      rep.firstErrorRank = r;
    }
  }

  // Step 4.
  std::map<int, int> score;
  std::map<int, std::vector<std::string>> reasons;
  for (const RankAt& at : rep.ranks) {
    if (at.state == "not joined") {
      score[at.rank] += 4;
      reasons[at.rank].push_back("never started call #" + std::to_string(rep.divergedAt) + " (its last completed call is #" +
                                 std::to_string(at.lastCompleted) + ")");
    } else if (at.state == "no dump") {
      score[at.rank] += 2;
      reasons[at.rank].push_back("wrote no dump (killed, stopped, or it never saw the error)");
    }
  }
  std::map<int, std::vector<int>> waitedBy;  // end of a chain of waits -> the ranks whose chains end there
  for (const RankAt& at : rep.ranks) {
    if (at.waitPeer < 0) continue;
    const int end = endOfWaits(rep.ranks, at.rank);
    if (end >= 0 && end != at.rank) waitedBy[end].push_back(at.rank);
  }
  for (const auto& [end, waiters] : waitedBy) {
    score[end] += static_cast<int>(waiters.size());
    reasons[end].push_back(plural(waiters) + " waited for it in call #" + std::to_string(rep.divergedAt) +
                           " (directly or through ranks waiting for it)");
  }
  if (rep.firstError && rep.firstError->failedRank >= 0 && rep.firstError->failedRank < rep.nranks) {
    score[rep.firstError->failedRank] += 1;
    reasons[rep.firstError->failedRank].push_back("the first error names it");
  }
  for (int r : minority) {
    score[r] += 3;
    reasons[r].push_back("its arguments differ from the others' at " + rep.mismatch.substr(0, rep.mismatch.find(':')));
  }
  std::vector<std::pair<int, int>> ordered;
  for (const auto& [r, sc] : score) ordered.emplace_back(-sc, r);
  std::sort(ordered.begin(), ordered.end());
  for (const auto& [negScore, r] : ordered) {
    rep.suspects.push_back(r);
    std::string why;
    for (const std::string& text : reasons[r]) {
      if (!why.empty()) why += "; ";
      why += text;
    }
    rep.why.push_back(why);
  }
  return rep;
}

Call parseCall(const nlohmann::json& e) {
  Call c;
  c.seq = e.at("seq").get<uint64_t>();
  c.p2p = e.value("kind", "collective") == "p2p";
  c.collective = e.value("collective", "");
  c.dtype = e.value("dtype", "");
  c.op = e.value("op", "");
  c.root = e.value("root", 0);
  c.count = e.value("count", uint64_t{0});
  c.bytes = e.value("bytes", uint64_t{0});
  c.algorithm = e.value("algorithm", "");
  c.state = e.at("state").get<std::string>();
  c.startNs = e.value("start_ns", int64_t{0});
  c.endNs = e.value("end_ns", int64_t{0});
  if (e.contains("waited")) {
    c.waitRound = e["waited"].value("round", 0);
    c.waitPeer = e["waited"].value("peer", -1);
  }
  return c;
}

}  // namespace

std::string Call::signature() const {
  if (p2p) return "point-to-point batch of " + std::to_string(count);
  std::string s = collective + " " + std::to_string(count) + " x " + dtype;
  if (collective == "allreduce" || collective == "reduce" || collective == "reducescatter") s += " " + op;
  if (collective == "reduce" || collective == "broadcast") s += " root " + std::to_string(root);
  return s;
}

RankDump parseDump(const nlohmann::json& j, const std::string& file) {
  try {
    if (j.value("schema", "") != "conflux.trace") throw std::runtime_error("not a conflux.trace dump");
    if (j.value("version", 0) != 1) {
      throw std::runtime_error("schema version " + std::to_string(j.value("version", 0)) + " (this reader knows 1)");
    }
    RankDump d;
    d.file = file;
    d.reason = j.value("reason", "");
    d.writtenNs = j.value("written_ns", int64_t{0});
    const auto& comm = j.at("comm");
    d.commId = comm.at("id").get<std::string>();
    d.commName = comm.value("name", "");
    d.rank = comm.at("rank").get<int>();
    d.nranks = comm.at("nranks").get<int>();
    d.node = comm.value("node", 0);
    d.host = comm.value("host", "");
    d.pid = comm.value("pid", int64_t{0});
    if (d.nranks <= 0 || d.rank < 0 || d.rank >= d.nranks) throw std::runtime_error("comm.rank is out of range");
    d.callsRecorded = j.value("calls_recorded", uint64_t{0});
    if (j.contains("error") && !j["error"].is_null()) {
      const auto& e = j["error"];
      d.error = DumpError{e.value("code", ""), e.value("message", ""), e.value("failed_rank", -1), e.value("time_ns", int64_t{0})};
    }
    for (const auto& e : j.at("entries")) d.calls.push_back(parseCall(e));
    return d;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(file + ": " + e.what());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(file + ": " + e.what());
  }
}

std::vector<RankDump> loadDumps(const std::string& dir, std::vector<std::string>* skipped) {
  std::vector<RankDump> dumps;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto& p = entry.path();
    if (entry.is_regular_file() && p.extension() == ".json" && p.filename().string()[0] != '.') files.push_back(p);
  }
  std::sort(files.begin(), files.end());
  for (const auto& p : files) {
    std::ifstream in(p);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || j.value("schema", "") != "conflux.trace") {
      if (skipped != nullptr) skipped->push_back(p.string() + ": not a conflux.trace dump");
      continue;
    }
    dumps.push_back(parseDump(j, p.string()));
  }
  return dumps;
}

std::vector<CommReport> analyze(const std::vector<RankDump>& dumps) {
  std::map<std::string, std::vector<const RankDump*>> byComm;
  for (const RankDump& d : dumps) byComm[d.commId].push_back(&d);
  std::vector<CommReport> out;
  for (const auto& [id, ds] : byComm) out.push_back(analyzeComm(ds));
  return out;
}

std::string toText(const std::vector<CommReport>& reports) {
  std::string s;
  for (const CommReport& r : reports) {
    s += "communicator " + r.commId + (r.name.empty() ? "" : " \"" + r.name + "\"") + ": " + std::to_string(r.nranks) +
         " ranks, dumps from " + plural(r.dumped) + (r.missing.empty() ? "" : " (none from " + plural(r.missing) + ")") +
         "\n";
    if (r.divergedAt == 0) {
      s += "  every dumped rank completed call #" + std::to_string(r.lastCommon) + " and is in no call\n";
    } else {
      s += "  all completed call #" + std::to_string(r.lastCommon) + "; they diverged at call #" +
           std::to_string(r.divergedAt) + (r.divergedCall.empty() ? "" : " (" + r.divergedCall + ")") + ":\n";
      for (const RankAt& at : r.ranks) {
        s += "    rank " + std::to_string(at.rank) + ": ";
        if (at.state == "started" || at.state == "failed") {
          s += std::string(at.state == "started" ? "in it" : "failed in it");
          if (at.waitRound > 0) {
            s += ", waiting" + (at.waitPeer >= 0 ? " for rank " + std::to_string(at.waitPeer) : std::string()) +
                 " (round " + std::to_string(at.waitRound) + ")";
          }
        } else if (at.state == "not joined") {
          s += "never started it (last completed #" + std::to_string(at.lastCompleted) + ")";
        } else {
          s += at.state;
        }
        s += "\n";
      }
    }
    if (!r.conflict.empty()) s += "  warning: " + r.conflict + "\n";
    if (!r.note.empty()) s += "  note: " + r.note + "\n";
    if (!r.mismatch.empty()) s += "  arguments differ at " + r.mismatch + "\n";
    if (!r.network.empty()) s += "  network: " + r.network + "\n";
    if (r.firstError) {
      s += "  first error: rank " + std::to_string(r.firstErrorRank) + " at " + utcTime(r.firstError->timeNs) + ": " +
           r.firstError->code + ": " + r.firstError->message + "\n";
    }
    for (size_t i = 0; i < r.suspects.size(); ++i) {
      s += std::string(i == 0 ? "  suspect: rank " : "  also: rank ") + std::to_string(r.suspects[i]) + ": " + r.why[i] + "\n";
    }
    if (r.suspects.empty()) s += "  no rank stands out\n";
  }
  return s;
}

nlohmann::json toJson(const std::vector<CommReport>& reports) {
  nlohmann::json out = nlohmann::json::array();
  for (const CommReport& r : reports) {
    nlohmann::json c;
    c["comm"] = r.commId;
    c["name"] = r.name;
    c["nranks"] = r.nranks;
    c["dumped"] = r.dumped;
    c["missing"] = r.missing;
    c["last_common"] = r.lastCommon;
    c["diverged_at"] = r.divergedAt;
    c["diverged_call"] = r.divergedCall;
    c["mismatch"] = r.mismatch;
    c["network"] = r.network;
    c["conflict"] = r.conflict;
    c["note"] = r.note;
    nlohmann::json ranks = nlohmann::json::array();
    for (const RankAt& at : r.ranks) {
      ranks.push_back({{"rank", at.rank}, {"state", at.state}, {"last_completed", at.lastCompleted},
                       {"wait_peer", at.waitPeer}, {"wait_round", at.waitRound}});
    }
    c["ranks"] = ranks;
    if (r.firstError) {
      c["first_error"] = {{"rank", r.firstErrorRank}, {"code", r.firstError->code}, {"message", r.firstError->message},
                          {"failed_rank", r.firstError->failedRank}, {"time_ns", r.firstError->timeNs}};
    } else {
      c["first_error"] = nullptr;
    }
    nlohmann::json suspects = nlohmann::json::array();
    for (size_t i = 0; i < r.suspects.size(); ++i) suspects.push_back({{"rank", r.suspects[i]}, {"why", r.why[i]}});
    c["suspects"] = suspects;
    out.push_back(c);
  }
  return out;
}

std::string render(const std::vector<CommReport>& reports, bool json) {
  return json ? toJson(reports).dump(2) + "\n" : toText(reports);
}

}  // namespace conflux::trace
