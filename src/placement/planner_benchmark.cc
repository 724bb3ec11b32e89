// Google Benchmarks of the planner's hot paths: a whole plan at 10,000 replicas on 2,000 GPUs,
// one Evaluate() of the shape search, and MIG packing. The quality comparison against lower
// bounds and exact optima is bench/planner_bench.
#include "absl/strings/str_cat.h"
#include "base/random.h"
#include "base/units.h"
#include "benchmark/benchmark.h"
#include "placement/mig_packer.h"
#include "placement/planner.h"
#include "placement/pool_builder.h"
#include "placement/test_fleets.h"

namespace tessera::placement {
namespace {

model::Fleet BigFleet() {
  return model::Fleet{{testing::MakePool("h100", "H100-80GB", 8, 125, 125),
                       testing::MakePool("a100", "A100-80GB", 8, 125, 125)}};
}

model::WorkloadSet BigWorkloads(int workloads, int replicas_each) {
  model::WorkloadSet set;
  Random rng(7);
  for (int i = 0; i < workloads; ++i) {
    double iso = rng.UniformDouble();
    set.workloads.push_back(testing::MakeWorkload(
        absl::StrCat("w", i), replicas_each, rng.UniformInt(2, 16) * kGiB,
        rng.UniformInt(5, 25) * 10,
        iso < 0.5 ? model::Isolation::kNone
                  : (iso < 0.8 ? model::Isolation::kMemory : model::Isolation::kFull)));
  }
  return set;
}

void BM_MakePlan10kReplicas2kGpus(benchmark::State& state) {
  model::Fleet fleet = BigFleet();
  model::WorkloadSet set = BigWorkloads(200, 50);
  for (auto _ : state) {
    Plan plan = MakePlan(fleet, set, {});
    benchmark::DoNotOptimize(plan.totals.gpus_after);
  }
  state.SetItemsProcessed(state.iterations() * 10000);
}
BENCHMARK(BM_MakePlan10kReplicas2kGpus)->Unit(benchmark::kMillisecond);

void BM_EvaluatePool(benchmark::State& state) {
  model::Fleet fleet = BigFleet();
  model::WorkloadSet set = BigWorkloads(100, 50);
  PoolBuilder builder(fleet.pools[0], set);
  std::vector<Member> members;
  for (int w = 0; w < 100; ++w) {
    ShapeChoice c = CandidateShapes(set.workloads[w], fleet.pools[0], {});
    members.push_back({w, 50, c.shapes[0]});
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(builder.Evaluate(members, true));
  }
}
BENCHMARK(BM_EvaluatePool)->Unit(benchmark::kMicrosecond);

void BM_MigPackInstances(benchmark::State& state) {
  const model::GpuModel& h100 = **model::GpuCatalog::Default().Lookup("H100-80GB");
  MigPacker packer(h100);
  std::vector<MigPacker::Instance> instances;
  Random rng(3);
  for (int i = 0; i < state.range(0); ++i) {
    static const int kProfiles[] = {0, 2, 3, 4, 5};
    instances.push_back({kProfiles[rng.UniformInt(0, 4)], static_cast<int>(i / 4)});
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(packer.PackInstances(instances, true).size());
  }
}
BENCHMARK(BM_MigPackInstances)->Arg(12)->Arg(1000);

}  // namespace
}  // namespace tessera::placement
