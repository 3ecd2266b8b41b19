// The cost of a plan from its own rounds: the alpha-beta parameters per link class of cost_model.h
// applied to the operations the plan really contains, so that every plan algorithm (the shared-memory
// ones included, which have no formula in cost_model.cc) gets a predicted time, and the hand-derived
// formulas can be checked against the plans they describe (test_cost_model).
#pragma once

#include "algorithms/algorithms.h"
#include "algorithms/cost_model.h"
#include "algorithms/plan.h"

namespace conflux {

/// Predicted seconds of plan algorithm `algo` for the call `p` describes (p.rank is ignored: the slowest
/// rank's rounds count; p.layout says which ranks share a node, null: all do). It builds every rank's
/// plan: for explanations and tests, not for every call. Every message pays its own alpha (as if
/// CostParams::extraMessage were 1), so for rhd of a radix above 2 it reads higher than the formulas. Negative when `algo` is no plan algorithm or does not support p.coll. Throws
/// what buildPlan throws for invalid parameters.
double planSeconds(Algo algo, const PlanParams& p, const CostParams& params);

/// Predicted seconds of an eager call (src/eager.cc, which has no plan): each rank publishes its input
/// of `inputBytes` (one flag), then reads and reduces (or copies) the n-1 peers' slots.
double eagerSeconds(uint64_t inputBytes, int nranks, const CostParams& params);

}  // namespace conflux
