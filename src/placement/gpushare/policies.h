// Online scheduling policies for GPU-sharing clusters, in the Kubernetes scheduler framework's
// shape: after Filter (ClusterState::Fits), Score gives a feasible node an integer 0-100 and
// the GPUs the pod would take there; the scheduler picks the highest score (ties at random).
// Definitions follow shared/reference/fgd-benchmark.md (sections 5 and 6).
//
// Example:
//   std::unique_ptr<Policy> fgd = MakePolicy("fgd", target);
//   Choice c = fgd->Score(state, node, pod);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/gpushare/cluster_state.h"
#include "placement/gpushare/fragmentation.h"

namespace tessera::placement::gpushare {

struct Choice {
  int64_t score = 0;
  std::vector<int> gpus;
  // Breaks equal scores: the higher wins; equal (score, tie) go by the scheduler's TieBreak.
  int64_t tie = 0;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  // Score of feasible node `node` for `pod` and the GPUs it would use. Deterministic.
  virtual Choice Score(const ClusterState& state, int node, const PodSpec& pod) const = 0;
  // Random picks a feasible node uniformly instead of scoring (see Scheduler).
  virtual bool uniform_random() const { return false; }
  // Told of every arriving pod before it is scheduled (a policy may learn the workload from
  // what has arrived so far, never from what is still to come).
  virtual void Observe(const PodSpec& /*pod*/) {}
  // Changes whenever Score's answers may change for an unchanged node (cached scores expire).
  virtual uint64_t epoch() const { return 0; }
};

// "random", "dotprod", "clustering", "packing", "bestfit", "fgd". `target` is FGD's target
// workload (the others ignore it).
absl::StatusOr<std::unique_ptr<Policy>> MakePolicy(const std::string& name,
                                                   const TargetWorkload& target);
std::vector<std::string> PolicyNames();

// FGD's choice on one node for `target`: the GPU (for a sharing pod) whose use grows the node's
// fragmentation least, and the score trunc(100 sigmoid(-delta / 1000)). Shared by `fgd` and
// `tessera`, which differ in where their target workload comes from.
Choice FgdChoice(const ClusterState& state, int node, const PodSpec& pod,
                 const TargetWorkload& target);

}  // namespace tessera::placement::gpushare
