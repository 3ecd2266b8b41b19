// The communicator behind a process group, shared (shared_ptr) with what may outlive the group object:
// works (a wait(timeout) aborts it) and the pre-multiplied-sum ops its calls made (released on it). Once
// the group shuts down, `comm` is null and those find nothing to do.
#pragma once

#include <mutex>

#include "conflux/conflux.h"

namespace conflux_torch {

struct CommHandle {
  std::mutex mutex;
  cfxComm_t comm = nullptr;

  /// cfxCommAbort, unless the communicator is gone.
  void abort() {
    std::lock_guard<std::mutex> lock(mutex);
    if (comm != nullptr) cfxCommAbort(comm);
  }
  /// cfxRedOpDestroy, unless the communicator is gone (its ops went with it).
  void releaseOp(cfxRedOp_t op) {
    std::lock_guard<std::mutex> lock(mutex);
    if (comm != nullptr) cfxRedOpDestroy(op, comm);
  }
};

}  // namespace conflux_torch
