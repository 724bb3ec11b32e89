// Tessera's online GPU-sharing policy, first version: fragmentation gradient descent without
// hindsight. FGD's artifact builds its target workload from the whole trace before the first
// pod arrives; this policy learns it from the pods that have arrived so far (relearning each time
// arrivals grow by half), and keeps every task class it has seen rather than the 95% most
// popular, so that rare large classes (multi-GPU pods) count too. It is not yet the policy that
// beats FGD by the margin the scheduler issue asks; see docs/scheduler.md for the figures.
#pragma once

#include <memory>

#include "placement/gpushare/policies.h"

namespace tessera::placement::gpushare {

std::unique_ptr<Policy> MakeTesseraPolicy();

}  // namespace tessera::placement::gpushare
