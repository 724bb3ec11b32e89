// One scheduling decision on a cluster shaped like Alibaba's 1,213-node GPU-sharing cluster
// (node counts per model and size from shared/reference/fgd-benchmark.md section 2), half
// full: with the per-(node, class) score cache (the scheduler's steady state: only the node
// changed last is rescored) and without it (every node rescored).
#include <algorithm>
#include <iterator>
#include <string>

#include "base/random.h"
#include "benchmark/benchmark.h"
#include "placement/gpushare/online_cluster.h"
#include "placement/gpushare/policies.h"
#include "placement/gpushare/scheduler.h"
#include "placement/gpushare/tessera_policy.h"

namespace tessera::placement::gpushare {
namespace {

std::vector<NodeSpec> OpenbShapedCluster() {
  struct Group {
    const char* model;
    int gpus, nodes;
    int64_t cpu;
  };
  const Group groups[] = {
      {"G2", 8, 549, 96000},     {"T4", 2, 387, 104000},    {"T4", 4, 17, 96000},
      {"G3", 8, 39, 128000},     {"P100", 1, 3, 8000},      {"P100", 2, 131, 64000},
      {"V100M32", 4, 9, 48000},  {"V100M32", 8, 21, 96000}, {"V100M16", 1, 19, 8000},
      {"V100M16", 4, 28, 32000}, {"V100M16", 8, 8, 64000},  {"A10", 1, 2, 128000}};
  std::vector<NodeSpec> nodes;
  for (const Group& g : groups) {
    for (int i = 0; i < g.nodes; ++i) {
      nodes.push_back({"n" + std::to_string(nodes.size()), g.cpu, 1 << 20, g.gpus, g.model});
    }
  }
  return nodes;
}

std::vector<PodSpec> Pods(int n, uint64_t seed) {
  Random rng(seed);
  const int64_t shares[] = {810, 470, 320, 650, 250, 1000, 1000, 1000};
  std::vector<PodSpec> pods;
  for (int i = 0; i < n; ++i) {
    PodSpec p;
    p.name = "p";
    p.cpu_milli = rng.UniformInt(2, 12) * 1000;
    p.memory_mib = 4096;
    p.gpu_milli = shares[rng.UniformInt(0, 7)];
    p.num_gpu = 1;
    pods.push_back(p);
  }
  return pods;
}

TargetWorkload Target() { return BuildTargetWorkload(Pods(2000, 1)); }

// Dense class id: pods of one class have equal requests (the scheduler's cache key). CPU is
// 2-12 cores and the share one of six values: 66 classes.
constexpr int kClasses = 11 * 6;
int ClassOf(const PodSpec& p) {
  static const int64_t kShares[] = {810, 470, 320, 650, 250, 1000};
  int share = static_cast<int>(std::find(std::begin(kShares), std::end(kShares), p.gpu_milli) -
                               std::begin(kShares));
  return static_cast<int>(p.cpu_milli / 1000 - 2) * 6 + share;
}

// Decisions in arrival order on a cluster filling up, `policy` learning from the arrivals as
// in trace-bench (tessera relearns its target as arrivals grow, which expires cached scores).
void DecisionCached(benchmark::State& state, const std::string& policy_name) {
  std::vector<NodeSpec> nodes = OpenbShapedCluster();
  std::vector<PodSpec> pods = Pods(4000, 2);
  auto policy = *MakePolicy(policy_name, Target());
  Random rng(3);
  auto cluster = std::make_unique<ClusterState>(nodes);
  auto sched = std::make_unique<Scheduler>(*cluster, *policy, rng, kClasses);
  size_t i = 0;
  for (auto _ : state) {
    if (i == pods.size()) {  // cluster about full: start over (not timed)
      state.PauseTiming();
      cluster = std::make_unique<ClusterState>(nodes);
      sched = std::make_unique<Scheduler>(*cluster, *policy, rng, kClasses);
      i = 0;
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(sched->Schedule(pods[i], ClassOf(pods[i])));
    ++i;
  }
}

void BM_FgdDecisionCached(benchmark::State& state) { DecisionCached(state, "fgd"); }
BENCHMARK(BM_FgdDecisionCached)->Unit(benchmark::kMicrosecond);

void BM_TesseraDecisionCached(benchmark::State& state) { DecisionCached(state, "tessera"); }
BENCHMARK(BM_TesseraDecisionCached)->Unit(benchmark::kMicrosecond);

void BM_FgdDecisionAllNodesRescored(benchmark::State& state) {
  std::vector<NodeSpec> nodes = OpenbShapedCluster();
  ClusterState cluster(nodes);
  auto policy = *MakePolicy("fgd", Target());
  Random rng(4);
  Scheduler warm(cluster, *policy, rng, kClasses);
  std::vector<PodSpec> pods = Pods(2000, 5);
  for (const PodSpec& p : pods) {
    warm.Schedule(p, ClassOf(p));
  }
  PodSpec pod = pods[0];
  for (auto _ : state) {
    int64_t best = -1;
    for (int n = 0; n < cluster.size(); ++n) {
      if (cluster.Fits(n, pod)) {
        best = std::max(best, policy->Score(cluster, n, pod).score);
      }
    }
    benchmark::DoNotOptimize(best);
  }
}
BENCHMARK(BM_FgdDecisionAllNodesRescored)->Unit(benchmark::kMicrosecond);

// The extender's cluster when the node watch sees a node deleted (one no pod holds GPUs on):
// 6,250 8-GPU nodes, 50,000 pods holding half a GPU each. The node goes without the others'
// state being rebuilt (rebuilt, holding every pod again, it took 29-33 ms of CPU); a node pool
// scaled down by N nodes costs N of these, each under the extender's lock.
void BM_OnlineClusterRemoveNode50000Pods(benchmark::State& state) {
  OnlineCluster cluster(MakeTesseraPolicy());
  constexpr int kNodes = 6250;
  for (int n = 0; n < kNodes; ++n) {
    cluster.UpsertNode({.name = "gpu-" + std::to_string(n),
                        .gpus = 8,
                        .model = "H100-80GB",
                        .gpu_memory_bytes = int64_t{80} << 30});
  }
  for (int i = 0; i < 50000; ++i) {
    absl::Status s = cluster.Restore("uid-" + std::to_string(i),
                                     {.node = "gpu-" + std::to_string(i / 8 % (kNodes - 1)),
                                      .gpus = {i % 8},
                                      .milli_per_gpu = 500,
                                      .user = ""});
    if (!s.ok()) state.SkipWithError("a pod could not be held");
  }
  const OnlineNode spare{
      .name = "spare", .gpus = 8, .model = "H100-80GB", .gpu_memory_bytes = int64_t{80} << 30};
  for (auto _ : state) {
    cluster.UpsertNode(spare);
    benchmark::DoNotOptimize(cluster.RemoveNode("spare"));
  }
}
BENCHMARK(BM_OnlineClusterRemoveNode50000Pods)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera::placement::gpushare
