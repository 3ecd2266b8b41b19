// For transport tests: drives a request to completion and watches its bytes move
// (transport::Request::movedBytes), which the executor counts as progress before the message completes.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

#include "transport/transport.h"

namespace conflux::testing {

/// Calls `step()` (progress or poll) until `r` is done or `limit` passes, checking that its moved bytes
/// only grow; true when it was ever seen partly moved (more than 0 and fewer than `total` bytes).
template <class Step>
bool sawBytesMoving(const transport::Request& r, uint64_t total, Step step,
                    std::chrono::seconds limit = std::chrono::seconds(20)) {
  bool sawPart = false;
  uint64_t last = 0;
  const auto until = transport::Clock::now() + limit;
  // Sampled before the first step too: a send may move part of its bytes when it is posted.
  for (;;) {
    const uint64_t moved = r.movedBytes();
    EXPECT_GE(moved, last) << "moved bytes only grow";
    last = moved;
    sawPart = sawPart || (moved > 0 && moved < total);
    if (r.done() || transport::Clock::now() >= until) break;
    step();
  }
  return sawPart;
}

}  // namespace conflux::testing
