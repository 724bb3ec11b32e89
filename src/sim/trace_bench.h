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
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/gpushare/cluster_state.h"
#include "placement/gpushare/scheduler.h"

namespace tessera::sim {

inline constexpr int kMaxBucket = 130;

// Where the GPU capacity stands that is not allocated once the arrivals reach 100% of it (or
// after the last arrival, when fewer arrive), in GPUs. Two accounts of the same gap: by the
// pods that failed, and by where the free share lies.
struct Unallocated {
  double arrived_pct = 0;  // arrivals when it was taken, % of capacity
  double unallocated = 0;  // capacity - allocated
  // Pods failed so far by request, (num_gpu, gpu_milli) -> (pods, GPUs requested).
  std::map<std::pair<int, int64_t>, std::pair<int, double>> failed;
  // Every GPU's free share, counted once in one of:
  double stranded = 0;               // on nodes whose free CPU or memory no arrived GPU pod fits
  double whole = 0;                  // fully free GPUs on other nodes
  std::array<double, 10> partial{};  // partly used GPUs on other nodes, by free share /100 milli

  double failed_gpus() const;
  double free_gpus() const;
};

struct RunResult {
  std::string policy;
  uint64_t seed = 0;
  double runtime_s = 0;  // CPU time of the run
  int failed_pods = 0;
  int pods = 0;                                    // arrivals, inflation included
  std::array<double, kMaxBucket + 1> alloc_pct{};  // used GPU / capacity, per arrived bucket
  std::array<double, kMaxBucket + 1> frag_pct{};   // F(M) / capacity, per arrived bucket
  Unallocated at_full;                             // once 100% has arrived
};

// `pods` in any order (they are sorted by name first, as the artifact does).
absl::StatusOr<RunResult> RunTraceBench(
    const std::vector<placement::gpushare::NodeSpec>& nodes,
    std::vector<placement::gpushare::PodSpec> pods, const std::string& policy, uint64_t seed,
    double inflate,
    placement::gpushare::TieBreak ties = placement::gpushare::TieBreak::kFirstInOrder);

// The free share of `state` by where it lies (Unallocated's second account; `failed` is left
// empty). `gpu_pod_asks`: the (CPU milli, memory MiB) of every GPU pod that has arrived.
Unallocated AccountUnallocated(const placement::gpushare::ClusterState& state,
                               const std::set<std::pair<int64_t, int64_t>>& gpu_pod_asks,
                               double arrived_pct);

// The most GPU capacity (%) any placement of the pods arrived could allocate, at each of
// `buckets` of the run RunTraceBench makes for `seed` (the same arrivals; a bucket's bound is the
// mean of the bounds of the states it averages): BoundSharedAllocation over the arrived pods' GPU
// shares, CPU, memory, nodes and GPU models left out. An upper bound on every policy, online or
// offline; RunTraceBench's errors for arrivals it cannot draw, and an error for a bucket outside
// 0..kMaxBucket.
absl::StatusOr<std::map<int, double>> BoundTraceBench(
    const std::vector<placement::gpushare::NodeSpec>& nodes,
    std::vector<placement::gpushare::PodSpec> pods, uint64_t seed, double inflate,
    const std::vector<int>& buckets);

// `policy` against `baseline`, paired by seed: for every seed both ran, the difference of their
// allocation at arrived bucket `bucket` (percentage points). One policy's spread from seed to
// seed is as large as the gap between two good ones, or larger, so two means say little;
// pairing takes out what each seed's arrival order does to both.
struct PairedDifference {
  int seeds = 0;
  double mean = 0;
  double std_error = 0;  // sample standard deviation / sqrt(seeds); 0 with one seed
  int ahead = 0;         // seeds where `policy` allocated more
  int behind = 0;        // ... less (the rest: exactly as much)
};
absl::StatusOr<PairedDifference> ComparePaired(const std::vector<RunResult>& runs,
                                               const std::string& policy,
                                               const std::string& baseline, int bucket);

// Python's round(): to the nearest integer, halves to even.
int RoundHalfEven(double x);

}  // namespace tessera::sim
