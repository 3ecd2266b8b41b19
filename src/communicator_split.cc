// Communicators made from another: cfxCommSplit (collective over the parent), cfxCommCreateGroup
// (collective over the members), cfxCommShrink (collective over the survivors, met at a recovery point,
// not over the parent); a child may share its parent's network (transport::Network::shareWith).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/bootstrap/bootstrap.h"
#include "core/bootstrap/store_server.h"
#include "core/bootstrap/unique_id.h"
#include "core/log.h"
#include "src/communicator.h"

namespace conflux {
namespace {

/// (color, key) of one rank in cfxCommSplit's exchange.
struct SplitEntry {
  int32_t color;
  int32_t key;
};


}  // namespace

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::split(int color, int key, CommOptions options, bool share) {
  // 1. Every rank's (color, key), over this communicator.
  const SplitEntry mine{color < 0 ? -1 : color, key};
  std::vector<SplitEntry> all(static_cast<size_t>(nranks_));
  CallArgs g;
  g.coll = Collective::AllGather;
  g.send = &mine;
  g.recv = all.data();
  g.count = sizeof(SplitEntry);
  g.dtype = DataType::Uint8;
  if (Status s = run(g); !s) throw Error(s.code(), "cfxCommSplit: exchanging colors: " + s.message());
  // 2. This rank's group, ordered by key then by rank here; its first member hosts the new rendezvous.
  std::vector<int> members;
  if (mine.color >= 0) {
    for (int r = 0; r < nranks_; ++r) {
      if (all[r].color == mine.color) members.push_back(r);
    }
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[a].key < all[b].key; });
  }
  const bool leader = !members.empty() && members.front() == rank_;
  // 3. The leaders' unique ids, over this communicator (zeros from everyone else). A group that spans
  // nodes needs a store the other nodes reach: the leader binds it as a multi-node job would.
  cfxUniqueId out{};
  std::shared_ptr<bootstrap::StoreServer> server;
  bootstrap::UniqueId id;
  if (leader) {
    server = bootstrap::StoreServer::startForNewJob(/*allLocal=*/numNodes_ == 1);
    id = server->uniqueId();
    out = bootstrap::encode(id);
  }
  std::vector<cfxUniqueId> ids(static_cast<size_t>(nranks_));
  g.send = &out;
  g.recv = ids.data();
  g.count = sizeof(cfxUniqueId);
  if (Status s = run(g); !s) throw Error(s.code(), "cfxCommSplit: exchanging the new communicators' ids: " + s.message());
  if (members.empty()) return nullptr;
  if (!leader) id = bootstrap::decode(ids[members.front()]);
  CFX_INFO(kInit, "rank %d: split color %d key %d", rank_, color, key);
  return joinChild(members, id, std::move(server), std::move(options), share);
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::createGroup(const std::vector<int>& members, CommOptions options,
                                                                bool share) {
  // The first member hosts the new rendezvous and sends its unique id to the others over this
  // communicator; only members take part.
  std::shared_ptr<bootstrap::StoreServer> server;
  bootstrap::UniqueId id;
  cfxUniqueId wire{};
  std::vector<P2pOp> ops;
  if (members.front() == rank_) {
    server = bootstrap::StoreServer::startForNewJob(/*allLocal=*/numNodes_ == 1);
    id = server->uniqueId();
    wire = bootstrap::encode(id);
    for (size_t i = 1; i < members.size(); ++i) ops.push_back(P2pOp{true, &wire, sizeof wire, members[i], nullptr});
  } else {
    ops.push_back(P2pOp{false, &wire, sizeof wire, members.front(), nullptr});
  }
  if (!ops.empty()) {
    if (Status s = runP2p(ops); !s) throw Error(s.code(), "cfxCommCreateGroup: sending the new communicator's id: " + s.message());
  }
  if (members.front() != rank_) id = bootstrap::decode(wire);
  CFX_INFO(kInit, "rank %d: creating a group of %zu ranks", rank_, members.size());
  return joinChild(members, id, std::move(server), std::move(options), share);
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::shrink(const std::vector<int>& excluded, CommOptions options,
                                                           bool share) {
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r) {
    if (!std::binary_search(excluded.begin(), excluded.end(), r)) members.push_back(r);
  }
  const int leader = members.front();
  std::string survivors;
  for (int r : members) {
    if (!survivors.empty()) survivors += ',';
    survivors += std::to_string(r);
  }
  const std::string where = "cfxCommShrink: the survivors (ranks " + survivors + ") meeting at rank " +
                            std::to_string(leader) + "'s recovery point";
  const sockaddr_storage& at = recoveryPoints_[static_cast<size_t>(leader)];
  if (at.ss_family == AF_UNSPEC) {
    throw Error(Code::SystemError, where + ": rank " + std::to_string(leader) + " could not bind one at init (see its log)");
  }
  // Every survivor has made the same shrinks with this list before (the survivors of a list are the same
  // ranks each time), so the count tells this shrink apart from them: its id, and so its shared-memory
  // names and flight-recorder files, are its own.
  std::lock_guard<std::mutex> lock(shrinkMutex_);
  const uint32_t generation = shrinks_[excluded]++;
  const bootstrap::UniqueId id = recovery_.shrinkId(at, excluded, generation);
  std::shared_ptr<bootstrap::StoreServer> server;
  if (leader == rank_) server = recovery_.serveShrink(excluded, generation);
  // Survivors learn of a failure at different times, up to a timeout apart (a rank on another node may
  // only see it time out): the rendezvous waits for two timeouts.
  if (options.timeoutMs < 0) options.timeoutMs = env_.timeoutMs;
  options.joinTimeoutMs = int(std::min<int64_t>(int64_t{2} * options.timeoutMs, INT32_MAX));
  CFX_INFO(kInit, "rank %d: shrinking %d ranks to %zu (ranks %s) at %s", rank_, nranks_, members.size(), survivors.c_str(),
           bootstrap::describe(id).c_str());
  // The parent may have failed: its cost model and network are still good (a shared view of the network
  // sends in a tag space of its own, so nothing of the failed call reaches the new communicator).
  try {
    return joinChild(members, id, std::move(server), std::move(options), share);
  } catch (const Error& e) {
    throw Error(e.code(), where + " " + bootstrap::describe(id) + ": " + e.what() +
                              " (every survivor calls cfxCommShrink with the same excludeRanks; a survivor that "
                              "failed too must be excluded)");
  }
}

std::unique_ptr<CommunicatorImpl> CommunicatorImpl::joinChild(const std::vector<int>& members,
                                                              const bootstrap::UniqueId& id,
                                                              std::shared_ptr<bootstrap::StoreServer> server,
                                                              CommOptions options, bool share) {
  const int newRank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  if (options.timeoutMs < 0) options.timeoutMs = env_.timeoutMs;
  // With `share`, the child takes this communicator's costs when it spans nodes, and may send through
  // its endpoints (openNetwork decides, with the other members).
  std::vector<int> nodeOf(static_cast<size_t>(nranks_), 0);
  for (size_t n = 0; n < nodeLayout_->nodes.size(); ++n) {
    for (int r : nodeLayout_->nodes[n]) nodeOf[static_cast<size_t>(r)] = static_cast<int>(n);
  }
  const bool childSpansNodes =
      std::any_of(members.begin(), members.end(), [&](int r) { return nodeOf[r] != nodeOf[members.front()]; });
  if (share && childSpansNodes) options.costs = selector_.costParams();
  options.parentRanks = members;
  if (share) options.parentNet = net_;
  CFX_INFO(kInit, "rank %d: -> rank %d of %zu in the new communicator", rank_, newRank, members.size());
  return create(id, static_cast<int>(members.size()), newRank, std::move(server), options);
}

}  // namespace conflux
