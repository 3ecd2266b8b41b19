// Collective helpers over the rendezvous store, used while a communicator is being built: all-gather of
// small blobs (addresses, host identities) and barriers, over all ranks or a subset (e.g. one node).
// Every call uses fresh keys (a per-group sequence number), so repeated calls never collide, and a rank
// that does not show up turns into an Error(Timeout) naming it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/bootstrap/store_client.h"
#include "core/error.h"

namespace conflux::bootstrap {

/// One rank's view of the bootstrap collectives. Not thread-safe; one per rank.
class Bootstrap {
 public:
  /// @p ns prefixes every key (e.g. the communicator's id) so several communicators can share a store.
  /// Throws Error(InvalidArgument) unless 0 <= rank < nranks.
  Bootstrap(std::unique_ptr<StoreClient> store, int rank, int nranks, std::string ns);

  /// This rank.
  int rank() const { return rank_; }
  /// Number of ranks.
  int nranks() const { return nranks_; }
  /// The store connection (for ad-hoc keys; prefix them with ns()). Error(InvalidUsage) after finish().
  StoreClient& store() { return client(); }
  /// The key prefix.
  const std::string& ns() const { return ns_; }

  /// Every rank calls it with the same size; returns nranks * size bytes, rank r's at offset r * size.
  /// Throws Error(Timeout) naming missing ranks, Error(InvalidUsage) when sizes differ.
  std::vector<uint8_t> allGather(const std::vector<uint8_t>& mine);

  /// Called by exactly the ranks in @p members (distinct, including this rank, same list on each);
  /// returns members.size() * size bytes in the order of @p members.
  std::vector<uint8_t> allGatherAmong(const std::vector<int>& members, const std::vector<uint8_t>& mine);

  /// Returns once every rank has called it; Error(Timeout) naming the missing ranks.
  void barrier();
  /// Returns once every rank in @p members has called it.
  void barrierAmong(const std::vector<int>& members);

  /// Ends this rank's use of the store: counts itself out and disconnects. Every rank calls it once;
  /// the rank whose process hosts the store (@p hostsStore) first waits until every rank has counted
  /// out, so destroying the store afterwards strands nobody (Error(Timeout) names the stragglers).
  /// Any later call on this object throws Error(InvalidUsage).
  void finish(bool hostsStore);

 private:
  StoreClient& client();
  std::string groupKey(const std::vector<int>& members) const;
  std::vector<int> allRanks() const;
  [[noreturn]] void missing(const std::string& what, const std::string& prefix, const std::vector<int>& members,
                            const Error& cause, int waitedFor = -1);

  std::unique_ptr<StoreClient> store_;
  int rank_, nranks_;
  std::string ns_;
  std::map<std::string, uint64_t> seq_;  // per group: calls made so far
};

}  // namespace conflux::bootstrap
