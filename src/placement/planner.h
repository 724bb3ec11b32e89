// The fleet planner behind `tessera plan`: decides for every GPU of a fleet a mode (exclusive,
// a legal MIG layout, MPS with N clients, time-slicing with N replicas) and its tenants, using
// as few GPUs (then nodes, then dollars) as it can while honouring each workload's memory,
// compute and isolation, the device plugin's one-sharing-config-per-node rule, one resource
// per workload (a Deployment has one pod template) and spreading replicas over two nodes.
// Pure: no I/O, deterministic. See docs/planner.md for the algorithm.
//
// Example:
//   Plan plan = MakePlan(fleet, workloads, PlannerOptions{});
//   for (const Unplaceable& u : plan.unplaceable) ...
#pragma once

#include "model/fleet.h"
#include "placement/plan.h"
#include "placement/shapes.h"

namespace tessera::placement {

Plan MakePlan(const model::Fleet& fleet, const model::WorkloadSet& workloads,
              const PlannerOptions& options);

// Lower bounds on the GPUs a pool needs for the workloads the plan put there.
struct LowerBounds {
  // Whole-GPU replicas plus the largest of the memory bound (sum of memory / GPU memory), the
  // compute bound (sum of compute shares; time-slicing's factor for isolation none) and the
  // MIG slice bound of full-isolation replicas (memory and SM slices of their smallest
  // profile).
  int simple = 0;
  // The larger of (a) the sum over replicas of the least share of one GPU each can take in any
  // shape (1 exclusive, min(memory/8, SM/7) of a fitting MIG profile, 1/slots at its most
  // MPS/time-slicing slots), which sees that slots are equal and MIG instances come in fixed
  // sizes, and (b) a counting bound: call a shape k-limited when it is a whole GPU, MPS or
  // time-slicing with at most k slots, or a MIG profile with more than 1/(k+1) of the GPU's SM
  // or memory slices; a GPU holds at most max(k, m_k) replicas whose every shape is k-limited
  // (m_k: the most k-limited instances in any legal MIG layout, by enumeration), so GPUs >=
  // ceil(their number / max(k, m_k)) for each k = 1..7.
  int shape_aware = 0;
};
LowerBounds PoolLowerBounds(const model::Pool& pool, const model::WorkloadSet& workloads,
                            const std::vector<std::pair<int, int>>& workload_replicas,
                            const PlannerOptions& options);

}  // namespace tessera::placement
