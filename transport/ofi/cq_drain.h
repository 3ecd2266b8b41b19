// Reading a libfabric completion queue, shared by the transport's rails and the NCCL net plugin.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <sys/types.h>

namespace conflux::ofi {

/// Reads up to 8 batches of 16 tagged completions from `cq`: onEntry(entry) for each completion,
/// onError() for each error entry (it must consume it with fi_cq_readerr), onFailure(rc) when fi_cq_read
/// itself fails (then reading stops). Stops early when the queue runs dry. Returns the entries handled.
template <class OnEntry, class OnError, class OnFailure>
int drainCompletions(fid_cq* cq, OnEntry&& onEntry, OnError&& onError, OnFailure&& onFailure) {
  constexpr int kBatch = 16;
  fi_cq_tagged_entry entries[kBatch];
  int total = 0;
  for (int round = 0; round < 8; ++round) {
    const ssize_t n = fi_cq_read(cq, entries, kBatch);
    if (n == -FI_EAGAIN) break;
    if (n == -FI_EAVAIL) {
      onError();
      ++total;
      continue;
    }
    if (n < 0) {
      onFailure(static_cast<int>(-n));
      break;
    }
    for (ssize_t i = 0; i < n; ++i) onEntry(entries[i]);
    total += static_cast<int>(n);
    if (n < kBatch) break;
  }
  return total;
}

}  // namespace conflux::ofi
