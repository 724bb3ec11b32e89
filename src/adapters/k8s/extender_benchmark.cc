// The extender's cost per kube-scheduler call on a cluster shaped like Alibaba's 1,213-node
// GPU-sharing cluster, half full: prioritize with 1,213 node names (nodeCacheCapable: true),
// JSON parse + policy score of every fitting node + JSON encode, without the HTTP hop; and
// filter the same way. Every call rescores every node (no per-class cache: pods differ).
#include "adapters/k8s/extender_service.h"
#include "base/random.h"
#include "benchmark/benchmark.h"
#include "placement/gpushare/tessera_policy.h"

namespace tessera::adapters {
namespace {

using nlohmann::json;

struct Fixture {
  std::unique_ptr<ExtenderService> svc;
  std::string args;
};

Fixture Build() {
  struct Group {
    const char* model;
    int gpus, nodes;
  };
  const Group groups[] = {{"A10", 8, 549},      {"T4", 2, 387},       {"T4", 4, 17},
                          {"A100-40GB", 8, 39}, {"V100-16GB", 1, 3},  {"V100-16GB", 2, 131},
                          {"V100-32GB", 4, 9},  {"V100-32GB", 8, 21}, {"V100-16GB", 1, 19},
                          {"V100-16GB", 4, 28}, {"V100-16GB", 8, 8},  {"A10", 1, 2}};
  std::vector<placement::gpushare::OnlineNode> nodes;
  json names = json::array();
  for (const Group& g : groups) {
    for (int i = 0; i < g.nodes; ++i) {
      std::string name = "node-" + std::to_string(nodes.size());
      nodes.push_back(
          {.name = name, .gpus = g.gpus, .model = g.model, .gpu_memory_bytes = int64_t{16} << 30});
      names.push_back(name);
    }
  }
  // Half the GPUs' share held by running pods, recorded as the extender would have.
  std::vector<PodInfo> pods;
  Random rng(7);
  const int64_t shares[] = {810, 470, 320, 650, 250, 1000};
  std::vector<std::vector<int64_t>> free(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) free[n].assign(nodes[n].gpus, 1000);
  for (int i = 0; i < 6000; ++i) {
    int n = static_cast<int>(rng.UniformInt(0, static_cast<int64_t>(nodes.size()) - 1));
    int g = static_cast<int>(rng.UniformInt(0, nodes[n].gpus - 1));
    int64_t s = shares[rng.UniformInt(0, 5)];
    if (free[n][g] < s) continue;
    free[n][g] -= s;
    PodInfo p;
    p.uid = "uid-" + std::to_string(i);
    p.name = "p" + std::to_string(i);
    p.ns = "default";
    p.node_name = nodes[n].name;
    p.phase = "Running";
    p.assignment = placement::gpushare::Assignment{nodes[n].name, {g}, s};
    pods.push_back(p);
  }
  Fixture f;
  f.svc = std::make_unique<ExtenderService>(placement::gpushare::MakeTesseraPolicy(), nullptr);
  f.svc->Rebuild(nodes, pods);
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", "bench"},
        {"namespace", "default"},
        {"uid", "bench-uid"},
        {"annotations", {{"tessera.io/gpu-memory", "6Gi"}, {"tessera.io/gpu-compute", "0.3"}}}}},
      {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "x"}}})}}}};
  f.args = json{{"pod", pod}, {"nodenames", names}}.dump();
  return f;
}

void BM_ExtenderPrioritize1213Nodes(benchmark::State& state) {
  Fixture f = Build();
  for (auto _ : state) {
    HttpReply r = f.svc->Prioritize(f.args);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_ExtenderPrioritize1213Nodes)->Unit(benchmark::kMicrosecond);

void BM_ExtenderFilter1213Nodes(benchmark::State& state) {
  Fixture f = Build();
  for (auto _ : state) {
    HttpReply r = f.svc->Filter(f.args);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_ExtenderFilter1213Nodes)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera::adapters
