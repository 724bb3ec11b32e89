// ExactMinGpus: the true minimum number of GPUs for a small single-pool instance under the
// planner's rules (one shape per workload, MIG geometry, equal MPS/time-slicing slots, replicas
// of a workload on two GPUs where there are two or more), found by exhaustive search. The
// yardstick for the planner's quality on instances of up to ~12 replicas (tests, bench/).
// Assumes the pool may grow freely (maxNodes large), so nodes never bind.
#pragma once

#include <optional>

#include "model/fleet.h"
#include "placement/shapes.h"

namespace tessera::placement {

// nullopt when some workload fits no shape, or the search exceeds `max_steps`.
std::optional<int> ExactMinGpus(const model::Pool& pool, const model::WorkloadSet& workloads,
                                const PlannerOptions& options, long max_steps = 50'000'000);

}  // namespace tessera::placement
