// An upper bound on the GPU share that any placement, online or offline, can allocate out of a
// set of pods on a cluster: the linear programming relaxation of packing the pods' GPU shares
// into the cluster's GPUs, solved by column generation, with a dual certificate checked against
// every way of filling one GPU. It leaves out everything else that constrains a placement (CPU,
// memory, nodes, GPU models, a multi-GPU pod's GPUs being on one node), so it is an upper bound
// on any real placement's allocation, not a policy.
//
// Why it is tight where it matters: a GPU holding an 810-milli share keeps 190 milli that only
// shares of 190 or less can fill, two 470s leave 60, and so on; how much of that waste no
// placement avoids depends on how many shares of each size there are, which is what the linear
// program weighs (docs/scheduler.md, "How much room is there?").
//
// Example:
//   ShareBound b = BoundSharedAllocation({{810, 1100}, {160, 74}, {1000, 4355}}, 6212);
//   b.gpus;  // no placement allocates more GPUs than this
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace tessera::placement::gpushare {

struct ShareBound {
  // The bound, in GPUs: the dual objective of the certificate below, at least the linear
  // program's optimum and at most min(gpus, total requested).
  double gpus = 0;
  // The certificate (linear programming duality): `per_gpu` is at least what any one GPU can
  // hold, counting each share of s milli as s/1000 less `price[s]`; then no placement allocates
  // more than gpus x per_gpu + sum over s of price[s] x shares of s.
  double per_gpu = 0;
  std::map<int64_t, double> price;  // by share in milli, each >= 0
  int columns = 0;                  // GPU fillings the column generation used
};

// A way of filling one GPU: share in milli -> how many.
using Filling = std::map<int64_t, int64_t>;

// `shares`: share in milli (1..1000; a pod of k whole GPUs is k shares of 1000) -> how many.
// Shares outside 1..1000 and counts <= 0 are left out. `fillings`, when given, are fillings to
// start the column generation from (those of a like call: bounds over a growing set of pods are
// found in far fewer rounds), and are replaced by the ones this call used.
ShareBound BoundSharedAllocation(const std::map<int64_t, int64_t>& shares, int64_t gpus,
                                 std::vector<Filling>* fillings = nullptr);

}  // namespace tessera::placement::gpushare
