// The FGD trace benchmark protocol (USENIX ATC '23 artifact; shared/reference/fgd-benchmark.md
// section 3) over the online scheduler: pods sorted by name, shuffled by seed, inflated by
// uniform resampling to `inflate` x the cluster's GPU capacity, scheduled one by one with no
// departures and no retries; GPU allocation and fragmentation logged after every pod and
// bucketed by arrived percent 0..130.
//
// Example:
//   RunResult r = RunTraceBench(nodes, pods, "fgd", 42, 1.3);
//   r.alloc_pct[100];   // % of GPU capacity allocated when 100% has arrived
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/gpushare/cluster_state.h"
#include "placement/gpushare/scheduler.h"

namespace tessera::sim {

inline constexpr int kMaxBucket = 130;

struct RunResult {
  std::string policy;
  uint64_t seed = 0;
  double runtime_s = 0;  // CPU time of the run
  int failed_pods = 0;
  int pods = 0;                                    // arrivals, inflation included
  std::array<double, kMaxBucket + 1> alloc_pct{};  // used GPU / capacity, per arrived bucket
  std::array<double, kMaxBucket + 1> frag_pct{};   // F(M) / capacity, per arrived bucket
};

// `pods` in any order (they are sorted by name first, as the artifact does).
absl::StatusOr<RunResult> RunTraceBench(
    const std::vector<placement::gpushare::NodeSpec>& nodes,
    std::vector<placement::gpushare::PodSpec> pods, const std::string& policy, uint64_t seed,
    double inflate,
    placement::gpushare::TieBreak ties = placement::gpushare::TieBreak::kFirstInOrder);

// Python's round(): to the nearest integer, halves to even.
int RoundHalfEven(double x);

}  // namespace tessera::sim
