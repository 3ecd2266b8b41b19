#include "transport/ofi/progress.h"

#include <poll.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cerrno>

#include "core/log.h"
#include "transport/ofi/cq_drain.h"
#include "transport/ofi/endpoint.h"

namespace conflux::ofi {

int Rail::readCompletions() {
  return drainCompletions(
      cq_.get(),
      [&](const fi_cq_tagged_entry& e) {
        auto* slot = static_cast<Slot*>(e.op_context);
        if (slot == nullptr || !slot->op) return;
        const detail::Op& op = *slot->op;
        const size_t expected = op.chunkLen(slot->chunk);
        if (!op.send && e.len != expected) {
          failSlot(slot, Status(Code::InvalidUsage, describeOp(op, cfg_.rank) + ": chunk " +
                                                       std::to_string(slot->chunk) + " carried " +
                                                       std::to_string(e.len) + " bytes, expected " +
                                                       std::to_string(expected) +
                                                       " (send and receive sizes must match)"));
          return;
        }
        completeSlot(slot);
      },
      [&] { handleCqError(); },
      [&](int err) { CFX_WARN(kNet, "ofi rank %d: fi_cq_read on rail %d: %s", cfg_.rank, cfg_.index, fi_strerror(err)); });
}

void Rail::handleCqError() {
  fi_cq_err_entry err{};
  if (fi_cq_readerr(cq_.get(), &err, 0) < 0) return;
  char provBuf[256] = {0};
  const char* provMsg = fi_cq_strerror(cq_.get(), err.prov_errno, err.err_data, provBuf, sizeof provBuf);
  auto* slot = static_cast<Slot*>(err.op_context);
  if (slot == nullptr || !slot->op) {
    CFX_WARN(kNet, "ofi rank %d: completion error without an operation on rail %d: %s (%s)", cfg_.rank,
             cfg_.index, fi_strerror(err.err), provMsg ? provMsg : "");
    return;
  }
  const Code code = err.err == FI_ECANCELED ? Code::Aborted
                    : err.err == FI_ETRUNC  ? Code::InvalidUsage
                                            : Code::RemoteError;
  std::string msg = describeOp(*slot->op, cfg_.rank) + ": chunk " + std::to_string(slot->chunk) + " on rail " +
                    std::to_string(cfg_.index) + " failed: " + fi_strerror(err.err);
  if (provMsg != nullptr && *provMsg != '\0') msg += std::string(" (provider: ") + provMsg + ")";
  if (err.err == FI_ETRUNC) msg += " (send and receive sizes must match)";
  if (!slot->op->failed) CFX_WARN(kNet, "%s", msg.c_str());  // once per operation
  failSlot(slot, Status(code, std::move(msg)));
}

bool armRails(const std::vector<std::unique_ptr<Rail>>& rails, SleepSet& set) {
  set.count = 0;
  set.allRailsHaveFd = true;
  for (const auto& rail : rails) {
    if (rail->waitFd() < 0) {
      set.allRailsHaveFd = false;
      continue;
    }
    fid* cq = rail->cqFid();
    const int rc = fi_trywait(rail->fabric(), &cq, 1);
    if (rc == -FI_EAGAIN) return false;  // completions may be pending: progress instead of sleeping
    if (rc != FI_SUCCESS) {
      set.allRailsHaveFd = false;
      continue;
    }
    set.fds[set.count++] = pollfd{rail->waitFd(), POLLIN, 0};
  }
  return true;
}

void sleepOn(SleepSet& set, Deadline until) {
  const auto now = Clock::now();
  auto limit = now + std::chrono::milliseconds(50);
  if (!set.allRailsHaveFd) limit = now + std::chrono::microseconds(200);
  until = std::min(until, limit);
  if (until <= now) return;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now).count();
  timespec ts{time_t(ns / 1000000000), long(ns % 1000000000)};
  if (::ppoll(set.count ? set.fds : nullptr, set.count, &ts, nullptr) < 0 && errno != EINTR) {
    CFX_WARN(kNet, "ofi: ppoll on completion queue wait objects failed: errno %d", errno);
  }
}

}  // namespace conflux::ofi
