// What the tuner decided, for the process's metrics service (core/metrics/service.h): per collective,
// message-size class and decision, the getCollInfo calls that took it. A decision is the NCCL
// algorithm and protocol the tuner preferred and what chose it (a rule of CONFLUX_TUNER_CONFIG or the
// cost model), or "nccl" when it left NCCL's table as it was. Counted with relaxed atomic additions
// into a fixed table (NCCL may call from several threads; no lock on its launch path).
#pragma once

#include <cstddef>

namespace conflux::plugin::tuner {

enum class DecidedBy : int { Rule = 0, Model = 1, Nccl = 2 };

/// Counts one getCollInfo call for `collType` of `nBytes` (algo and proto: NCCL's indices; ignored for Nccl).
void countDecision(int collType, size_t nBytes, DecidedBy by, int algo, int proto);
/// A tuner context was made (+1) or freed (-1): the conflux_tuner_communicators gauge.
void countContext(int delta);
/// Starts the metrics service for the tuner when asked, once per process, and adds the tuner's source.
/// Never throws (a malformed CONFLUX_METRICS_ADDR is a warning through Conflux's log).
void startTunerMetrics();

}  // namespace conflux::plugin::tuner
