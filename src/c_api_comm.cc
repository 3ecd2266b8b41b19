// The C ABI of communicators: unique ids, init (by rank, from a launcher's environment), split and group
// creation, destroy, abort, asynchronous errors and the rank queries.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "conflux/conflux.h"
#include "core/bootstrap/launcher_env.h"
#include "core/bootstrap/unique_id.h"
#include "core/config.h"
#include "core/log.h"
#include "src/c_api_shared.h"
#include "src/group.h"
#include "src/store_registry.h"

namespace conflux {
namespace {

using namespace capi;

/// The per-communicator settings of a cfxConfig_t (NULL: none), each bad field named.
Status readConfig(const cfxConfig_t* config, CommOptions& out, int* splitShare) {
  if (config == nullptr) return Status::ok();
  // A caller built against an older header passes a smaller struct: fields past its size are unset (and
  // a newer one's extra fields are ignored), so the struct can grow without breaking binaries.
  if (config->magic != CFX_CONFIG_MAGIC || config->size < offsetof(cfxConfig_t, timeoutMs)) {
    return Status(Code::InvalidArgument, "config: not initialised with CFX_CONFIG_INITIALIZER (magic " +
                                             std::to_string(config->magic) + ", size " + std::to_string(config->size) + ")");
  }
  auto has = [&](size_t offset, size_t bytes) { return config->size >= offset + bytes; };
  if (has(offsetof(cfxConfig_t, timeoutMs), sizeof(int)) && config->timeoutMs != CFX_CONFIG_UNDEF_INT) {
    if (config->timeoutMs < 1) {
      return Status(Code::InvalidArgument, "config->timeoutMs: " + std::to_string(config->timeoutMs) + " must be >= 1");
    }
    out.timeoutMs = config->timeoutMs;
  }
  if (has(offsetof(cfxConfig_t, commName), sizeof(const char*)) && config->commName != nullptr) {
    out.name = std::string(config->commName).substr(0, 63);
  }
  if (splitShare != nullptr && has(offsetof(cfxConfig_t, splitShare), sizeof(int)) &&
      config->splitShare != CFX_CONFIG_UNDEF_INT) {
    if (config->splitShare != 0 && config->splitShare != 1) {
      return Status(Code::InvalidArgument, "config->splitShare: " + std::to_string(config->splitShare) + " must be 0 or 1");
    }
    *splitShare = config->splitShare;
  }
  return Status::ok();
}

/// The body of cfxCommInitRank and cfxCommInitRankConfig.
Status initRank(cfxComm_t* comm, int nranks, const cfxUniqueId& commId, int rank, const cfxConfig_t* config) {
  if (comm == nullptr) return Status(Code::InvalidArgument, "comm is NULL");
  if (nranks < 1) return Status(Code::InvalidArgument, "nranks: " + std::to_string(nranks) + " must be >= 1");
  if (rank < 0 || rank >= nranks) {
    return Status(Code::InvalidArgument, "rank: " + std::to_string(rank) + " is not in [0, " + std::to_string(nranks) + ")");
  }
  CommOptions options;
  if (Status s = readConfig(config, options, nullptr); !s) return s;
  bootstrap::UniqueId id = bootstrap::decode(commId);
  auto c = std::make_unique<cfxComm>();
  c->impl = CommunicatorImpl::create(id, nranks, rank, claimRendezvous(id), options);
  *comm = c.release();
  return Status::ok();
}

/// The `n` ranks at `list` (argument `what`), each a rank of a communicator of `size`, none twice, into
/// `out` in the caller's order. `list` may be NULL when `n` is 0.
Status readRankList(const char* what, const int* list, int n, int size, std::vector<int>* out) {
  if (list == nullptr && n > 0) return Status(Code::InvalidArgument, std::string(what) + " is NULL");
  out->assign(list, list + n);
  std::vector<char> seen(static_cast<size_t>(size), 0);
  for (int i = 0; i < n; ++i) {
    const int r = (*out)[static_cast<size_t>(i)];
    const std::string at = std::string(what) + "[" + std::to_string(i) + "]: ";
    if (r < 0 || r >= size) {
      return Status(Code::InvalidArgument, at + std::to_string(r) + " is not a rank of comm (" + std::to_string(size) + " ranks)");
    }
    if (seen[static_cast<size_t>(r)]++) return Status(Code::InvalidArgument, at + "rank " + std::to_string(r) + " is listed twice");
  }
  return Status::ok();
}

}  // namespace
}  // namespace conflux

using namespace conflux;
using namespace conflux::capi;

extern "C" {

cfxResult_t cfxGetUniqueId(cfxUniqueId* uniqueId) {
  return guarded("cfxGetUniqueId", [&]() -> Status {
    if (uniqueId == nullptr) return Status(Code::InvalidArgument, "uniqueId is NULL");
    *uniqueId = bootstrap::encode(startRendezvous(/*allLocal=*/true));
    return Status::ok();
  });
}

cfxResult_t cfxGetUniqueIdForNodes(cfxUniqueId* uniqueId, int spansNodes) {
  return guarded("cfxGetUniqueIdForNodes", [&]() -> Status {
    if (uniqueId == nullptr) return Status(Code::InvalidArgument, "uniqueId is NULL");
    *uniqueId = bootstrap::encode(startRendezvous(/*allLocal=*/spansNodes == 0));
    return Status::ok();
  });
}

cfxResult_t cfxCommInitRank(cfxComm_t* comm, int nranks, cfxUniqueId commId, int rank) {
  if (comm != nullptr) *comm = nullptr;
  return guarded("cfxCommInitRank", [&]() -> Status { return initRank(comm, nranks, commId, rank, nullptr); });
}

cfxResult_t cfxCommInitRankConfig(cfxComm_t* comm, int nranks, cfxUniqueId commId, int rank,
                                  const cfxConfig_t* config) {
  if (comm != nullptr) *comm = nullptr;
  return guarded("cfxCommInitRankConfig", [&]() -> Status { return initRank(comm, nranks, commId, rank, config); });
}

cfxResult_t cfxCommSplit(cfxComm_t comm, int color, int key, cfxComm_t* newcomm, const cfxConfig_t* config) {
  if (newcomm != nullptr) *newcomm = nullptr;
  return guarded("cfxCommSplit", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (newcomm == nullptr) return Status(Code::InvalidArgument, "newcomm is NULL");
    if (color < 0 && color != CFX_SPLIT_NOCOLOR) {
      return Status(Code::InvalidArgument, "color: " + std::to_string(color) + " must be >= 0 or CFX_SPLIT_NOCOLOR");
    }
    if (group::active()) return Status(Code::InvalidUsage, "cfxCommSplit cannot be called inside a group");
    CommOptions options;
    int share = 1;
    if (Status s = readConfig(config, options, &share); !s) return s;
    std::unique_ptr<CommunicatorImpl> child = comm->impl->split(color, key, options, share == 1);
    if (child == nullptr) return Status::ok();
    auto c = std::make_unique<cfxComm>();
    c->impl = std::move(child);
    *newcomm = c.release();
    return Status::ok();
  }, comm);
}


cfxResult_t cfxCommCreateGroup(cfxComm_t comm, int nranks, const int* ranks, cfxComm_t* newcomm,
                               const cfxConfig_t* config) {
  if (newcomm != nullptr) *newcomm = nullptr;
  return guarded("cfxCommCreateGroup", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (newcomm == nullptr) return Status(Code::InvalidArgument, "newcomm is NULL");
    const int size = comm->impl->nranks(), me = comm->impl->rank();
    if (nranks < 1 || nranks > size) {
      return Status(Code::InvalidArgument, "nranks: " + std::to_string(nranks) + " must be 1.." + std::to_string(size));
    }
    std::vector<int> members;
    if (Status s = readRankList("ranks", ranks, nranks, size, &members); !s) return s;
    if (std::find(members.begin(), members.end(), me) == members.end()) {
      return Status(Code::InvalidArgument, "ranks: the calling rank " + std::to_string(me) + " is not listed (only members call it)");
    }
    if (group::active()) return Status(Code::InvalidUsage, "cfxCommCreateGroup cannot be called inside a group");
    CommOptions options;
    int share = 1;
    if (Status s = readConfig(config, options, &share); !s) return s;
    auto c = std::make_unique<cfxComm>();
    c->impl = comm->impl->createGroup(members, options, share == 1);
    *newcomm = c.release();
    return Status::ok();
  }, comm);
}

cfxResult_t cfxCommShrink(cfxComm_t comm, const int* excludeRanks, int excludeCount, cfxComm_t* newcomm,
                          const cfxConfig_t* config) {
  if (newcomm != nullptr) *newcomm = nullptr;
  return guarded("cfxCommShrink", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (newcomm == nullptr) return Status(Code::InvalidArgument, "newcomm is NULL");
    const int size = comm->impl->nranks(), me = comm->impl->rank();
    if (excludeCount < 0 || excludeCount >= size) {
      return Status(Code::InvalidArgument, "excludeCount: " + std::to_string(excludeCount) + " must be 0.." +
                                               std::to_string(size - 1) + " (at least the caller survives)");
    }
    std::vector<int> excluded;
    if (Status s = readRankList("excludeRanks", excludeRanks, excludeCount, size, &excluded); !s) return s;
    if (auto self = std::find(excluded.begin(), excluded.end(), me); self != excluded.end()) {
      return Status(Code::InvalidArgument, "excludeRanks[" + std::to_string(self - excluded.begin()) + "]: the calling rank " +
                                               std::to_string(me) + " is excluded (excluded ranks do not call it)");
    }
    std::sort(excluded.begin(), excluded.end());
    if (group::active()) return Status(Code::InvalidUsage, "cfxCommShrink cannot be called inside a group");
    CommOptions options;
    int share = 1;
    if (Status s = readConfig(config, options, &share); !s) return s;
    auto c = std::make_unique<cfxComm>();
    c->impl = comm->impl->shrink(excluded, options, share == 1);
    *newcomm = c.release();
    return Status::ok();
  }, comm);
}

cfxResult_t cfxCommInitFromEnv(cfxComm_t* comm) {
  if (comm != nullptr) *comm = nullptr;
  return guarded("cfxCommInitFromEnv", [&]() -> Status {
    if (comm == nullptr) return Status(Code::InvalidArgument, "comm is NULL");
    auto timeout = std::chrono::milliseconds(config::getInt(config::Var::TIMEOUT_MS));
    bootstrap::EnvBootstrap env = bootstrap::resolveFromEnvironment(bootstrap::defaultEnvLookup(), timeout);
    CFX_INFO(kInit, "launcher environment: %s, rank %d of %d", env.source.c_str(), env.rank, env.nranks);
    auto impl = CommunicatorImpl::create(env.id, env.nranks, env.rank, env.server);
    env.finish();
    auto c = std::make_unique<cfxComm>();
    c->impl = std::move(impl);
    *comm = c.release();
    return Status::ok();
  });
}

cfxResult_t cfxCommDestroy(cfxComm_t comm) {
  return guarded("cfxCommDestroy", [&]() -> Status {
    if (comm == nullptr) return Status(Code::InvalidArgument, "comm is NULL");
    group::forget(comm->impl.get());
    delete comm;
    return Status::ok();
  });
}

cfxResult_t cfxCommAbort(cfxComm_t comm) {
  return guarded("cfxCommAbort", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    comm->impl->abort();
    return Status::ok();
  });
}

cfxResult_t cfxCommGetAsyncError(cfxComm_t comm, cfxResult_t* asyncError) {
  return guarded("cfxCommGetAsyncError", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (asyncError == nullptr) return Status(Code::InvalidArgument, "asyncError is NULL");
    Status e = comm->impl->asyncError();
    *asyncError = static_cast<cfxResult_t>(e.code());
    if (!e.isOk()) lastError() = "cfxCommGetAsyncError: " + e.message();
    return Status::ok();
  });
}

cfxResult_t cfxCommCount(const cfxComm_t comm, int* count) {
  return guarded("cfxCommCount", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (count == nullptr) return Status(Code::InvalidArgument, "count is NULL");
    *count = comm->impl->nranks();
    return Status::ok();
  });
}

cfxResult_t cfxCommUserRank(const cfxComm_t comm, int* rank) {
  return guarded("cfxCommUserRank", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (rank == nullptr) return Status(Code::InvalidArgument, "rank is NULL");
    *rank = comm->impl->rank();
    return Status::ok();
  });
}

cfxResult_t cfxCommLocalRank(const cfxComm_t comm, int* localRank, int* localSize) {
  return guarded("cfxCommLocalRank", [&]() -> Status {
    if (Status s = checkComm(comm); !s) return s;
    if (localRank == nullptr) return Status(Code::InvalidArgument, "localRank is NULL");
    if (localSize == nullptr) return Status(Code::InvalidArgument, "localSize is NULL");
    *localRank = comm->impl->localRank();
    *localSize = comm->impl->localSize();
    return Status::ok();
  });
}

}  // extern "C"
