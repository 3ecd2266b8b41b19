// Bootstrap collectives over the store; see bootstrap.h.
//
// allGather #s of group g: rank r sets "<ns>/ag/<g>/<s>/<r>", then gets every member's key. Storage stays
// bounded: at call s a rank deletes its key of call s-2, which every member has read by then (a rank in
// call s has finished call s-1, so every member has set its key of s-1 and finished reading s-2).
//
// barrier #s: each member sets "<ns>/bar/<g>/<s>/<r>" (used only to name the absent on timeout) and ADDs
// to ".../count"; the member whose ADD reaches the group size sets ".../done", which all wait for.
// finish() is a barrier ("<ns>/fin/...") that only the rank hosting the store waits for.
#include "core/bootstrap/bootstrap.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "core/bootstrap/crypto.h"
#include "core/error.h"

namespace conflux::bootstrap {

Bootstrap::Bootstrap(std::unique_ptr<StoreClient> store, int rank, int nranks, std::string ns)
    : store_(std::move(store)), rank_(rank), nranks_(nranks), ns_(std::move(ns)) {
  if (!store_) throw Error(Code::InvalidArgument, "bootstrap: no store client");
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    throw Error(Code::InvalidArgument, "bootstrap: rank " + std::to_string(rank) + " is not in [0, " +
                                           std::to_string(nranks) + ")");
  }
}

StoreClient& Bootstrap::client() {
  if (!store_) {
    throw Error(Code::InvalidUsage, "bootstrap: rank " + std::to_string(rank_) + " used the store after finish()");
  }
  return *store_;
}

std::vector<int> Bootstrap::allRanks() const {
  std::vector<int> all(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) all[static_cast<size_t>(r)] = r;
  return all;
}

std::string Bootstrap::groupKey(const std::vector<int>& members) const {
  if (static_cast<int>(members.size()) == nranks_) {
    bool identity = true;
    for (int i = 0; i < nranks_; ++i) identity = identity && members[static_cast<size_t>(i)] == i;
    if (identity) return "all";
  }
  std::set<int> seen;
  bool self = false;
  for (int m : members) {
    if (m < 0 || m >= nranks_ || !seen.insert(m).second) {
      throw Error(Code::InvalidArgument, "bootstrap: member list has an invalid or repeated rank " +
                                             std::to_string(m) + " (nranks " + std::to_string(nranks_) + ")");
    }
    self = self || m == rank_;
  }
  if (!self) {
    throw Error(Code::InvalidUsage, "bootstrap: rank " + std::to_string(rank_) +
                                        " called a group collective it is not a member of");
  }
  std::string text;
  for (int m : members) text += std::to_string(m) + ",";
  Digest d = sha256(text);
  return toHex(d.data(), 8);
}

void Bootstrap::missing(const std::string& what, const std::string& prefix, const std::vector<int>& members,
                        const Error& cause, int waitedFor) {
  std::string absent;
  int count = 0;
  bool asked = true;
  try {
    for (int m : members) {
      if (m == rank_ || client().check(prefix + std::to_string(m))) continue;
      if (count++ < 16) absent += (absent.empty() ? "" : ", ") + std::to_string(m);
    }
  } catch (const Error&) {
    // The store cannot be asked about the others (the timed-out request left the connection unusable):
    // name the rank whose key this one waited for, which at least is missing.
    count = 0;
    absent.clear();
    asked = false;
  }
  if (!asked && waitedFor >= 0) {
    count = 1;
    absent = std::to_string(waitedFor) + " (at least)";
  }
  if (count > 16) absent += ", ... (" + std::to_string(count) + " in all)";
  if (count == 0) throw Error(cause.code(), "bootstrap: " + what + " failed: " + cause.what());
  throw Error(Code::Timeout, "bootstrap: " + what + " timed out after " +
                                 std::to_string(client().timeout().count()) + " ms: rank(s) " + absent +
                                 " never arrived (rank " + std::to_string(rank_) + ", store " +
                                 client().address() + ")");
}

std::vector<uint8_t> Bootstrap::allGather(const std::vector<uint8_t>& mine) { return allGatherAmong(allRanks(), mine); }

std::vector<uint8_t> Bootstrap::allGatherAmong(const std::vector<int>& members, const std::vector<uint8_t>& mine) {
  const std::string group = groupKey(members);
  const uint64_t seq = seq_[group]++;
  const std::string base = ns_ + "/ag/" + group + "/";
  const std::string prefix = base + std::to_string(seq) + "/";
  const std::string what = "allGather #" + std::to_string(seq) + (group == "all" ? "" : " of group " + group);
  if (seq >= 2) client().remove(base + std::to_string(seq - 2) + "/" + std::to_string(rank_));
  client().set(prefix + std::to_string(rank_), mine);

  std::vector<uint8_t> out(members.size() * mine.size());
  const auto deadline = Clock::now() + client().timeout();
  for (size_t i = 0; i < members.size(); ++i) {
    int m = members[i];
    if (m == rank_) {
      if (!mine.empty()) std::memcpy(out.data() + i * mine.size(), mine.data(), mine.size());
      continue;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    std::vector<uint8_t> v;
    try {
      v = client().get(prefix + std::to_string(m), std::max(left, std::chrono::milliseconds(0)));
    } catch (const Error& e) {
      if (e.code() == Code::Timeout) missing(what, prefix, members, e, m);
      // Most often the store's host gave up waiting for the same rank a moment before this one (or it
      // exited): say which rank this one waited for, not only the key (found by the fault matrix).
      throw Error(e.code(), "bootstrap: " + what + ": rank " + std::to_string(rank_) + " waited for rank " +
                                std::to_string(m) + ": " + e.what());
    }
    if (v.size() != mine.size()) {
      throw Error(Code::InvalidUsage, "bootstrap: " + what + ": rank " + std::to_string(m) + " contributed " +
                                          std::to_string(v.size()) + " bytes, rank " + std::to_string(rank_) +
                                          " " + std::to_string(mine.size()));
    }
    if (!v.empty()) std::memcpy(out.data() + i * mine.size(), v.data(), v.size());
  }
  return out;
}

void Bootstrap::barrier() { barrierAmong(allRanks()); }

void Bootstrap::barrierAmong(const std::vector<int>& members) {
  const std::string group = groupKey(members);
  const uint64_t seq = seq_["barrier/" + group]++;
  const std::string base = ns_ + "/bar/" + group + "/";
  const std::string prefix = base + std::to_string(seq) + "/";
  const std::string what = "barrier #" + std::to_string(seq) + (group == "all" ? "" : " of group " + group);
  if (members.size() == 1) return;
  if (seq >= 2) {
    const std::string old = base + std::to_string(seq - 2) + "/";
    client().remove(old + std::to_string(rank_));
    if (rank_ == members.front()) {
      client().remove(old + "count");
      client().remove(old + "done");
    }
  }
  client().set(prefix + std::to_string(rank_), {});
  if (client().add(prefix + "count", 1) == static_cast<int64_t>(members.size())) {
    client().set(prefix + "done", {});
    return;
  }
  try {
    client().get(prefix + "done");
  } catch (const Error& e) {
    if (e.code() != Code::Timeout) throw;
    missing(what, prefix, members, e);
  }
}

void Bootstrap::finish(bool hostsStore) {
  StoreClient& c = client();
  const std::string prefix = ns_ + "/fin/";
  c.set(prefix + std::to_string(rank_), {});
  if (c.add(prefix + "count", 1) == nranks_) {
    c.set(prefix + "done", {});
  } else if (hostsStore) {
    try {
      c.get(prefix + "done");
    } catch (const Error& e) {
      if (e.code() != Code::Timeout) throw;
      missing("finish", prefix, allRanks(), e);
    }
  }
  store_.reset();
}

}  // namespace conflux::bootstrap
