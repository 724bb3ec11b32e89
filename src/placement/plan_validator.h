// ValidatePlan: an independent check of every rule a Plan must keep, written apart from the
// planner so that tests and benchmarks can trust a plan without trusting the planner. Used by
// unit tests, the planner benchmark, and `tessera plan` itself as a last guard before writing.
#pragma once

#include <string>
#include <vector>

#include "model/fleet.h"
#include "placement/plan.h"
#include "placement/shapes.h"

namespace tessera::placement {

// Every violated rule, as readable sentences; empty when the plan is valid.
// Checks: MIG layouts legal and instances big enough; MPS/time-slicing slots per node-wide
// config with memory <= GPU/slots and compute <= cap/slots; isolation levels; every placed
// replica exactly once (N-GPU replicas on N GPUs of one node); one shape per workload;
// allowed models; node counts within maxNodes; replicas on >= 2 nodes where maxNodes >= 2;
// totals consistent with the nodes.
std::vector<std::string> ValidatePlan(const model::Fleet& fleet,
                                      const model::WorkloadSet& workloads, const Plan& plan,
                                      const PlannerOptions& options);

}  // namespace tessera::placement
