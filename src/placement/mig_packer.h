// Packs a demand of MIG instances (a count per profile) into as few GPUs as it can, each GPU a
// legal layout. Greedy: fill one GPU at a time with the largest instances that still have a
// legal placement, and repeat a GPU's composition while the demand lasts. Feasibility of a
// composition is memoised, so packing thousands of instances costs microseconds.
//
// Example:
//   MigPacker packer(h100);
//   std::vector<MigGpu> gpus = packer.Pack({0, 0, 0, 4, 2, 0, 0});   // 4x 2g, 2x 3g
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "model/gpu_catalog.h"
#include "model/mig_geometry.h"

namespace tessera::placement {

struct MigGpu {
  std::vector<int> counts;  // instances per profile
  model::MigLayout layout;  // a legal placement of `counts`
  int repeat = 1;           // how many GPUs have this composition
};

class MigPacker {
 public:
  explicit MigPacker(const model::GpuModel& model) : model_(model) {}

  // Compositions covering `demand` (one entry per profile; +me profiles must be 0).
  std::vector<MigGpu> Pack(const std::vector<int>& demand);
  // Total GPUs of a packing.
  static int CountGpus(const std::vector<MigGpu>& gpus);
  // Whether `counts` has a legal placement (memoised FindPlacement).
  bool Feasible(const std::vector<int>& counts);

  // One MIG instance a replica needs: its profile and its workload.
  struct Instance {
    int profile = 0;
    int workload = 0;
  };
  // Packs `instances` into GPUs, each workload with two or more instances on two or more GPUs
  // when `spread`. Up to kExactInstances instances: the fewest GPUs, by exhaustive search
  // (bounded by kExactSteps, then the best found); beyond: first-fit decreasing that keeps a
  // workload's second instance off the GPU of its first. Returns, per GPU, indices into
  // `instances`.
  std::vector<std::vector<int>> PackInstances(const std::vector<Instance>& instances, bool spread);

  static constexpr int kExactInstances = 16;
  static constexpr long kExactSteps = 200'000;

 private:
  uint64_t Key(const std::vector<int>& counts) const;

  const model::GpuModel& model_;
  absl::flat_hash_map<uint64_t, bool> feasible_;
};

}  // namespace tessera::placement
