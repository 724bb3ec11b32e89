#include "placement/test_fleets.h"

#include "absl/strings/str_cat.h"
#include "base/units.h"

namespace tessera::placement::testing {

model::Pool MakePool(const std::string& name, const std::string& gpu_model, int gpus_per_node,
                     int nodes, int max_nodes) {
  model::Pool p;
  p.name = name;
  p.gpu = *model::GpuCatalog::Default().Lookup(gpu_model);
  p.gpus_per_node = gpus_per_node;
  p.nodes = nodes;
  p.max_nodes = max_nodes;
  p.cost_per_gpu_hour = p.gpu->price_per_gpu_hour;
  p.gpu_memory_bytes = p.gpu->memory_bytes;
  p.mig_allowed = p.gpu->mig_capable();
  return p;
}

model::Workload MakeWorkload(const std::string& name, int replicas, int64_t memory_bytes,
                             int64_t compute_milli, model::Isolation isolation) {
  model::Workload w;
  w.name = name;
  w.replicas = replicas;
  w.memory_bytes = memory_bytes;
  w.compute_milli = compute_milli;
  w.isolation = isolation;
  w.container_name = name;
  return w;
}

void GenerateInstance(Random& rng, const GeneratorSpec& spec, model::Fleet* fleet,
                      model::WorkloadSet* workloads) {
  static const char* kModels[] = {"A100-40GB",  "A100-80GB", "H100-80GB", "H100-94GB",
                                  "H200-141GB", "B200",      "A30-24GB",  "L4",
                                  "L40S",       "A10",       "T4"};
  fleet->pools.clear();
  workloads->workloads.clear();
  int pools = static_cast<int>(rng.UniformInt(spec.pools_min, spec.pools_max));
  for (int i = 0; i < pools; ++i) {
    const char* m = kModels[rng.UniformInt(0, std::size(kModels) - 1)];
    int gpn = rng.Bernoulli(0.7) ? 8 : static_cast<int>(rng.UniformInt(1, 4));
    int nodes = static_cast<int>(rng.UniformInt(1, 6));
    fleet->pools.push_back(MakePool(absl::StrCat("pool", i), m, gpn, nodes, nodes + 64));
  }
  int n = static_cast<int>(rng.UniformInt(spec.workloads_min, spec.workloads_max));
  for (int i = 0; i < n; ++i) {
    double kind = rng.UniformDouble();
    int64_t mem;
    int64_t compute;
    if (kind < 0.35) {  // small models, embeddings, rerankers
      mem = rng.UniformInt(2, 12) * kGiB;
      compute = rng.UniformInt(5, 30) * 10;
    } else if (kind < 0.65) {  // 7B-8B at fp16 with KV cache
      mem = rng.UniformInt(15, 22) * kGiB;
      compute = rng.UniformInt(15, 50) * 10;
    } else if (kind < 0.85) {  // 13B-14B
      mem = rng.UniformInt(27, 36) * kGiB;
      compute = rng.UniformInt(25, 60) * 10;
    } else if (kind < 0.93 || !spec.whole_gpu_workloads) {  // 30B-class, a big share
      mem = rng.UniformInt(40, 70) * kGiB;
      compute = rng.UniformInt(40, 90) * 10;
    } else {  // 70B: 2-4 whole GPUs
      int gpus = static_cast<int>(rng.UniformInt(2, 4));
      mem = rng.UniformInt(140, 160) * kGiB;
      compute = int64_t{gpus} * 1000;
    }
    double iso = rng.UniformDouble();
    model::Isolation isolation = iso < 0.5   ? model::Isolation::kNone
                                 : iso < 0.8 ? model::Isolation::kMemory
                                             : model::Isolation::kFull;
    int replicas = static_cast<int>(rng.UniformInt(spec.replicas_min, spec.replicas_max));
    workloads->workloads.push_back(
        MakeWorkload(absl::StrCat("w", i), replicas, mem, compute, isolation));
  }
}

}  // namespace tessera::placement::testing
