// Tessera's online GPU-sharing policy: fragmentation gradient descent without hindsight, and
// CPU-only pods placed where they strand the least GPU.
// - FGD's artifact builds its target workload from the whole trace before the first pod
//   arrives; this policy learns it from the pods that have arrived so far (relearning each time
//   arrivals grow by half), and keeps every task class it has seen rather than the 95% most
//   popular, so that rare large classes (multi-GPU pods) count too.
// - Among nodes of equal score, a CPU-only pod goes to the one with the least free GPU.
// Ahead of FGD on every shared trace, not by the margin the scheduler issue asks on the default
// one; see docs/scheduler.md for the figures.
#pragma once

#include <memory>

#include "placement/gpushare/policies.h"

namespace tessera::placement::gpushare {

std::unique_ptr<Policy> MakeTesseraPolicy();

}  // namespace tessera::placement::gpushare
