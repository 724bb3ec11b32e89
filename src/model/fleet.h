// Value types for what the planner plans over: node pools of one GPU model (the Fleet) and
// inference workloads with their per-replica GPU needs (the WorkloadSet). Decoders in
// adapters/k8s build them from YAML/JSON; the planner and later the simulator consume them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/gpu_catalog.h"

namespace tessera::model {

// Where a value came from, for error messages and reports ("fleet.yaml:7").
struct SourceRef {
  std::string file;
  int line = 0;  // 1-based; 0 when unknown
  std::string ToString() const;
};

struct Pool {
  std::string name;
  const GpuModel* gpu = nullptr;  // borrowed from the catalog
  int gpus_per_node = 0;
  int nodes = 0;      // nodes that exist now
  int max_nodes = 0;  // how far the pool may grow (>= nodes)
  double cost_per_gpu_hour = 0;
  // Memory per GPU planned with: the catalog's, or GFD's `nvidia.com/gpu.memory` when known.
  int64_t gpu_memory_bytes = 0;
  // Whether MIG may be used: the catalog's, and false when GFD says `nvidia.com/mig.capable`
  // is false.
  bool mig_allowed = false;
  // Names of existing nodes when known (kubectl input); planned nodes beyond them are named
  // "<pool>-new-<i>".
  std::vector<std::string> node_names;
  SourceRef source;
};

struct Fleet {
  std::vector<Pool> pools;
};

// What sharing a workload tolerates. kNone: anything (MIG, MPS, time-slicing, exclusive);
// kMemory: MIG or MPS (memory limits enforced); kFull: MIG or a whole GPU.
enum class Isolation { kNone, kMemory, kFull };
const char* IsolationName(Isolation i);

struct Workload {
  std::string name;
  std::string ns = "default";
  int replicas = 0;
  int64_t memory_bytes = 0;  // peak GPU memory per replica (over all its GPUs)
  // GPU compute per replica in milli-GPU: below 1000 a share of one GPU; a multiple of 1000 is
  // that many whole GPUs (1000 = one whole GPU).
  int64_t compute_milli = 0;
  Isolation isolation = Isolation::kNone;
  std::vector<const GpuModel*> allowed_models;  // empty: any model
  // Container whose GPU request is rewritten (Deployment input; else the workload's name).
  std::string container_name;
  // The Deployment manifest this workload came from, as YAML text; empty for WorkloadSet input.
  std::string deployment_yaml;
  SourceRef source;

  // Whole GPUs per replica (0 for a shared replica).
  int whole_gpus() const {
    return compute_milli >= 1000 ? static_cast<int>(compute_milli / 1000) : 0;
  }
  std::string key() const { return ns + "/" + name; }
  bool Allows(const GpuModel& m) const;
};

struct WorkloadSet {
  std::vector<Workload> workloads;
};

}  // namespace tessera::model
