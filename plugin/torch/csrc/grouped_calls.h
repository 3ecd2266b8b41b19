// Several Conflux calls as one group (cfxGroupStart .. cfxGroupEnd), as the backend issues coalesced
// batches and the list-shaped operations, keeping the first failure and its message: later calls of the
// group may overwrite the thread's last error before the failure is reported.
#pragma once

#include <memory>
#include <string>

#include "conflux/conflux.h"

namespace conflux_torch {

/// The first failure of a sequence of calls, and its message (into `message` when that is set).
struct FirstError {
  cfxResult_t r = cfxSuccess;
  std::string* message = nullptr;
  /// Notes one call's result; `known` is a message the call kept itself (a nested group), if any.
  void operator()(cfxResult_t x, const std::string* known = nullptr) {
    if (r != cfxSuccess || x == cfxSuccess) return;
    r = x;
    if (message != nullptr) *message = known != nullptr && !known->empty() ? *known : cfxGetLastError(nullptr);
  }
};

/// Runs `body(first)` inside a Conflux group (nested groups are flattened by Conflux); `body` passes each
/// call's result to `first`. Returns the first failure, of the group's start and end too.
template <class Body>
cfxResult_t grouped(std::string* message, Body&& body) {
  FirstError first{cfxSuccess, message};
  first(cfxGroupStart());
  body(first);
  first(cfxGroupEnd());
  return first.r;
}

}  // namespace conflux_torch
