// MIG geometry: which sets of GPU instances can coexist on one GPU, and where they sit.
// Used by the planner (pack replicas into MIG layouts), the emitters (mig-parted configs) and
// tests. Rules (shared/reference/gpu-sharing.md sections 1-4): an instance occupies memory
// slices [start, start + memory_slices) and must start at one of its profile's legal slots;
// instances do not overlap; per-profile maximum counts; at most one `+me` instance; compute
// slices add up to at most the GPU's SM slices; at most mig_max_instances instances.
//
// Example:
//   const GpuModel& h100 = ...;
//   std::vector<int> counts(h100.profiles.size(), 0);
//   counts[h100.ProfileIndex("3g.40gb")] = 2;
//   std::optional<MigLayout> layout = FindPlacement(h100, counts);   // 3g@0 + 3g@4
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/gpu_catalog.h"

namespace tessera::model {

struct MigInstance {
  int profile = 0;  // index into GpuModel::profiles
  int start = 0;    // first memory slice
  bool operator==(const MigInstance&) const = default;
};

// Instances ordered by start slot (FindPlacement and EnumerateMaximalLayouts return them so).
using MigLayout = std::vector<MigInstance>;

// OK if `layout` is legal on `model`; otherwise InvalidArgument naming the first broken rule.
absl::Status ValidateLayout(const GpuModel& model, const MigLayout& layout);

// A legal placement of `counts[i]` instances of profile i, or nullopt if none exists (proof by
// exhaustive search over legal starts). `counts` has one entry per profile of `model`.
std::optional<MigLayout> FindPlacement(const GpuModel& model, const std::vector<int>& counts);

// Every maximal legal layout of `model`: legal, and no instance of any profile can be added.
// Deterministic order.
std::vector<MigLayout> EnumerateMaximalLayouts(const GpuModel& model);

// Profile counts of a layout (one entry per profile).
std::vector<int> LayoutCounts(const GpuModel& model, const MigLayout& layout);

// "2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4".
std::string FormatLayout(const GpuModel& model, const MigLayout& layout);

}  // namespace tessera::model
