// Test and benchmark helpers: fleets and workloads built in code, and a generator of random
// realistic instances (model mixes, LLM-sized and small workloads). Not used by the product.
#pragma once

#include <string>

#include "base/random.h"
#include "model/fleet.h"

namespace tessera::placement::testing {

model::Pool MakePool(const std::string& name, const std::string& gpu_model, int gpus_per_node,
                     int nodes, int max_nodes);

model::Workload MakeWorkload(const std::string& name, int replicas, int64_t memory_bytes,
                             int64_t compute_milli,
                             model::Isolation isolation = model::Isolation::kNone);

struct GeneratorSpec {
  int pools_min = 1, pools_max = 3;
  int workloads_min = 3, workloads_max = 12;
  int replicas_min = 1, replicas_max = 8;
  bool whole_gpu_workloads = true;  // include 70B-class N-GPU replicas
};

// A random fleet and workload set: pools of catalog models (MIG-capable and not), workloads
// drawn from common serving footprints (small models 2-12 GiB, 7B ~16-20 GiB, 13B ~28-34 GiB,
// 70B on 2-4 GPUs) with compute shares 0.05-0.6 and mixed isolation.
void GenerateInstance(Random& rng, const GeneratorSpec& spec, model::Fleet* fleet,
                      model::WorkloadSet* workloads);

}  // namespace tessera::placement::testing
