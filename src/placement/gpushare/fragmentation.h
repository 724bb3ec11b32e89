// Fragmentation of GPU-sharing nodes against a target workload, as FGD (USENIX ATC '23)
// defines it (shared/reference/fgd-benchmark.md section 5): for a class m of tasks, node n's
// fragment F_n(m) is all its free GPU share if m cannot run there at all, else the free slivers
// of its GPUs too small for m; F_n(M) weights the classes by popularity. Used by the FGD policy
// and by the trace benchmark's fragmentation curve.
#pragma once

#include <map>
#include <tuple>
#include <vector>

#include "placement/gpushare/cluster_state.h"

namespace tessera::placement::gpushare {

struct TaskClass {
  int64_t cpu_milli = 0;
  int num_gpu = 0;
  int64_t gpu_milli = 0;
  std::vector<std::string> gpu_spec;
  double weight = 0;  // popularity, sums to 1 over the workload
  int64_t count = 0;  // tasks of this class in the source trace
};

struct TargetWorkload {
  std::vector<TaskClass> classes;
  // Derived by Index(): the distinct per-GPU shares of the GPU classes, so a node's GPUs are
  // scanned once per share rather than once per class; the GPU classes grouped by (share, GPU
  // count, allowed models), each group's CPU asks ascending with the running sum of their
  // weights, so a node is checked once per group (a binary search on its free CPU finds the
  // classes that fit) rather than once per class; the distinct model constraints, so a node's
  // model is checked once per constraint rather than once per group; the total weight of the
  // CPU-only classes (all free GPU is their fragment); and how many classes were indexed
  // (NodeFragmentation indexes a copy of a workload whose classes changed since).
  std::vector<int64_t> shares;
  std::vector<std::vector<std::string>> specs;  // distinct allowed-model lists
  struct Group {
    int share = 0;
    int num_gpu = 0;
    int spec = 0;                     // its allowed models: specs[spec]
    std::vector<int64_t> cpu_milli;   // ascending
    std::vector<double> weight_upto;  // weight_upto[k]: sum of the first k classes' weights
  };
  std::vector<Group> groups;
  double cpu_only_weight = 0;
  size_t indexed_classes = 0;
  void Index();
};

// The target workload of a trace: tasks keyed by (cpu, per-GPU share, GPU count, allowed
// models), CPU-only tasks included; keys by count (most popular first; ties by key), taken
// `step` at a time until they cover `coverage` of all tasks; weights renormalised to 1.
TargetWorkload BuildTargetWorkload(const std::vector<PodSpec>& pods, double coverage = 0.95,
                                   int step = 10);

// The task-class counts BuildTargetWorkload works from, kept incrementally (a long-running
// scheduler holds one count per distinct class, not every pod it has seen).
class TaskClassCounts {
 public:
  void Add(const PodSpec& pod);
  int64_t total() const { return total_; }
  TargetWorkload Build(double coverage = 0.95, int step = 10) const;

 private:
  using Key = std::tuple<int64_t, int64_t, int, std::vector<std::string>>;
  std::map<Key, int64_t> counts_;
  int64_t total_ = 0;
};

// F_n(M) in milli-GPU for node `n` of `state`.
double NodeFragmentation(const ClusterState& state, const NodeState& n,
                         const TargetWorkload& target);

}  // namespace tessera::placement::gpushare
