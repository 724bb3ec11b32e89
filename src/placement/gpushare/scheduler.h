// The online scheduling loop over a ClusterState: Filter -> Score -> pick the highest score
// -> Reserve. Ties go to the first node in the scheduler's node order (the trace benchmark
// makes that order a random permutation per seed), or uniformly at random by reservoir
// sampling (kube-scheduler's selectHost). The FGD artifact's published results match the
// first; see docs/scheduler.md. Scores
// are cached per (node, pod class) and recomputed only for nodes whose state changed, so a
// decision costs O(nodes) cache probes plus the rescoring of the one node changed last.
//
// Example:
//   Scheduler s(state, *policy, rng, /*num_classes=*/classes);
//   std::optional<Decision> d = s.Schedule(pod, class_id);
#pragma once

#include <optional>
#include <vector>

#include "base/random.h"
#include "placement/gpushare/cluster_state.h"
#include "placement/gpushare/policies.h"

namespace tessera::placement::gpushare {

enum class TieBreak { kFirstInOrder, kRandom };

struct Decision {
  int node = -1;
  std::vector<int> gpus;
};

class Scheduler {
 public:
  // `num_classes`: pod classes (pods with equal requests and allowed models) the caller will
  // pass to Schedule as dense ids 0..num_classes-1.
  // `order`: the order nodes are visited in (a permutation of 0..state.size()-1; empty: index
  // order).
  Scheduler(ClusterState& state, Policy& policy, Random& rng, int num_classes,
            std::vector<int> order = {}, TieBreak ties = TieBreak::kFirstInOrder);

  // Places `pod` (of class `pod_class`) and returns where, or nullopt when no node fits.
  std::optional<Decision> Schedule(const PodSpec& pod, int pod_class);

 private:
  struct Entry {
    uint64_t version = UINT64_MAX;
    uint64_t epoch = 0;
    bool fits = false;
    Choice choice;
  };
  ClusterState& state_;
  Policy& policy_;
  Random& rng_;
  std::vector<int> order_;
  TieBreak ties_;
  std::vector<Entry> cache_;  // [class * nodes + position of the node in order_]
};

}  // namespace tessera::placement::gpushare
