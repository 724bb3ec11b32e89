// The GPU catalog: the single source of truth for GPU models, their memory and SMs, their MIG
// profiles (geometry, start slots, `+me` rules) and a default price. Every part of Tessera that
// needs a fact about a GPU model (planner, scheduler, simulator, audit) reads it from here.
// Facts come from shared/reference/gpu-sharing.md (NVIDIA MIG user guide, mig-parted, GFD).
//
// Example:
//   const GpuCatalog& catalog = GpuCatalog::Default();
//   absl::StatusOr<const GpuModel*> h100 = catalog.Lookup("NVIDIA-H100-80GB-HBM3");
//   const MigProfile* p = (*h100)->FindProfile("3g.40gb");
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::model {

// A MIG GPU-instance profile of one GPU model.
struct MigProfile {
  std::string name;               // e.g. "3g.40gb", "1g.10gb+me"
  int profile_id = 0;             // NVML GPU-instance profile id (nvidia-smi mig -lgip "ID")
  int memory_slices = 0;          // memory slices it occupies (of 8, or 4 on A30)
  int compute_slices = 0;         // SM slices (of 7, or 4 on A30)
  int max_count = 0;              // most instances of this profile on one GPU
  std::vector<int> starts;        // legal start slots (memory-slice index)
  bool media_extensions = false;  // "+me": at most one such instance per GPU
  int64_t memory_bytes = 0;       // usable memory planned with (see kMigUsableFraction)
};

// A GPU model.
struct GpuModel {
  std::string name;                        // catalog name, e.g. "H100-80GB"
  std::vector<std::string> product_names;  // GFD `nvidia.com/gpu.product` values seen for it
  int64_t memory_bytes = 0;                // total memory as NVML reports it
  int sm_count = 0;
  double price_per_gpu_hour = 0;  // default USD price; users override per pool
  // MIG geometry; zero slices and no profiles when the model is not MIG-capable.
  int mig_memory_slices = 0;         // 8, or 4 on A30
  int mig_compute_slices = 0;        // 7, or 4 on A30
  int mig_max_instances = 0;         // 7, or 4 on A30
  std::vector<MigProfile> profiles;  // ordered by memory_slices, then compute, then +me

  bool mig_capable() const { return !profiles.empty(); }
  // The profile with this name (exact), or nullptr.
  const MigProfile* FindProfile(absl::string_view profile_name) const;
  // Index of the profile with this name, or -1.
  int ProfileIndex(absl::string_view profile_name) const;
};

// Usable memory of a MIG instance as a fraction of its proportional share of the GPU's total
// (memory_slices / mig_memory_slices x memory_bytes). Calibrated on `nvidia-smi mig -lgip` of an
// H100-80GB (81559 MiB total): 1g 9.75 GiB, 2g 19.62 GiB, 3g/4g 39.50 GiB, 7g 79.25 GiB, i.e.
// 0.979-0.995 of proportional; 0.97 stays below every published figure, so a replica planned
// into a profile really fits.
inline constexpr double kMigUsableFraction = 0.97;

class GpuCatalog {
 public:
  // The built-in catalog. Thread-safe, immutable, lives for the whole program.
  static const GpuCatalog& Default();

  explicit GpuCatalog(std::vector<GpuModel> models) : models_(std::move(models)) {}

  const std::vector<GpuModel>& models() const { return models_; }

  // Resolves a catalog name ("H100-80GB", case-insensitive) or a GPU-feature-discovery product
  // name ("NVIDIA-H100-80GB-HBM3", "Tesla-T4", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
  // "NVIDIA-H100-80GB-HBM3-SHARED"). Where the product name does not say the memory size and
  // the family has several (A100, V100), `memory_mib_hint` (GFD's `nvidia.com/gpu.memory`)
  // picks the nearest. NotFound lists the known names.
  absl::StatusOr<const GpuModel*> Lookup(absl::string_view name,
                                         std::optional<int64_t> memory_mib_hint = {}) const;

  // "A100-40GB, A100-80GB, ..." for error messages.
  std::string KnownNames() const;

 private:
  std::vector<GpuModel> models_;
};

}  // namespace tessera::model
