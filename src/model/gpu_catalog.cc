#include "model/gpu_catalog.h"

#include <cmath>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/units.h"

namespace tessera::model {
namespace {

int64_t Mib(int64_t mib) { return mib * kMiB; }

int64_t MigMemory(int64_t total_bytes, int slices, int total_slices) {
  return static_cast<int64_t>(static_cast<double>(total_bytes) * slices / total_slices *
                              kMigUsableFraction);
}

// The 8-memory-slice family (A100, H100, H200, B200): profile names differ by model, geometry
// does not. `names` lists the seven classes in table order:
// 1g, 1g+me, 1g double-memory, 2g, 3g, 4g, 7g (reference gpu-sharing.md sections 2 and 3).
std::vector<MigProfile> EightSliceProfiles(int64_t total_bytes,
                                           const std::vector<std::string>& names) {
  struct Class {
    int id, mem, sm, max;
    std::vector<int> starts;
    bool me;
  };
  const Class classes[7] = {
      {19, 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}, false},
      {20, 1, 1, 1, {0, 1, 2, 3, 4, 5, 6}, true},
      {15, 2, 1, 4, {0, 2, 4, 6}, false},
      {14, 2, 2, 3, {0, 2, 4}, false},
      {9, 4, 3, 2, {0, 4}, false},
      {5, 4, 4, 1, {0}, false},
      {0, 8, 7, 1, {0}, false},
  };
  std::vector<MigProfile> out;
  for (int i = 0; i < 7; ++i) {
    const Class& c = classes[i];
    out.push_back(MigProfile{names[i], c.id, c.mem, c.sm, c.max, c.starts, c.me,
                             MigMemory(total_bytes, c.mem, 8)});
  }
  return out;
}

GpuModel PlainModel(std::string name, std::vector<std::string> products, int64_t mib, int sms,
                    double price) {
  GpuModel m;
  m.name = std::move(name);
  m.product_names = std::move(products);
  m.memory_bytes = Mib(mib);
  m.sm_count = sms;
  m.price_per_gpu_hour = price;
  return m;
}

GpuModel EightSliceModel(std::string name, std::vector<std::string> products, int64_t mib, int sms,
                         double price, const std::vector<std::string>& profile_names) {
  GpuModel m = PlainModel(std::move(name), std::move(products), mib, sms, price);
  m.mig_memory_slices = 8;
  m.mig_compute_slices = 7;
  m.mig_max_instances = 7;
  m.profiles = EightSliceProfiles(m.memory_bytes, profile_names);
  return m;
}

GpuModel A30() {
  GpuModel m = PlainModel("A30-24GB", {"NVIDIA-A30"}, 24576, 56, 1.10);
  m.mig_memory_slices = 4;
  m.mig_compute_slices = 4;
  m.mig_max_instances = 4;
  auto mem = [&](int slices) { return MigMemory(m.memory_bytes, slices, 4); };
  // Reference gpu-sharing.md section 4.
  m.profiles = {
      {"1g.6gb", 14, 1, 1, 4, {0, 1, 2, 3}, false, mem(1)},
      {"1g.6gb+me", 21, 1, 1, 1, {0, 1, 2, 3}, true, mem(1)},
      {"2g.12gb", 5, 2, 2, 2, {0, 2}, false, mem(2)},
      {"2g.12gb+me", 6, 2, 2, 1, {0, 2}, true, mem(2)},
      {"4g.24gb", 0, 4, 4, 1, {0}, false, mem(4)},
  };
  return m;
}

// Default prices: rounded public on-demand list prices per GPU-hour in USD (late 2025), meant
// as a starting point; every pool can set costPerGpuHour.
std::vector<GpuModel> BuiltinModels() {
  std::vector<GpuModel> models;
  models.push_back(EightSliceModel(
      "A100-40GB", {"NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB"}, 40960, 108, 2.50,
      {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}));
  models.push_back(EightSliceModel(
      "A100-80GB", {"NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe"}, 81920, 108, 3.00,
      {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}));
  models.push_back(EightSliceModel(
      "H100-80GB", {"NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe", "NVIDIA-H100-SXM5-80GB"}, 81559,
      132, 4.00, {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}));
  models.push_back(EightSliceModel(
      "H100-94GB", {"NVIDIA-H100-NVL"}, 95830, 132, 4.25,
      {"1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"}));
  models.push_back(EightSliceModel(
      "H200-141GB", {"NVIDIA-H200", "NVIDIA-H200-NVL", "NVIDIA-H200-141GB-HBM3e"}, 143771, 132,
      5.00, {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}));
  models.push_back(EightSliceModel(
      "B200", {"NVIDIA-B200"}, 183359, 148, 6.50,
      {"1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"}));
  models.push_back(A30());
  models.push_back(PlainModel("L4", {"NVIDIA-L4"}, 23034, 58, 0.80));
  models.push_back(PlainModel("L40S", {"NVIDIA-L40S"}, 46068, 142, 1.90));
  models.push_back(PlainModel("A10", {"NVIDIA-A10"}, 23028, 72, 1.00));
  models.push_back(PlainModel("T4", {"Tesla-T4"}, 15360, 40, 0.45));
  models.push_back(
      PlainModel("V100-16GB", {"Tesla-V100-SXM2-16GB", "Tesla-V100-PCIE-16GB"}, 16160, 80, 1.50));
  models.push_back(
      PlainModel("V100-32GB", {"Tesla-V100-SXM2-32GB", "Tesla-V100-PCIE-32GB"}, 32510, 80, 1.80));
  return models;
}

std::string Upper(absl::string_view s) { return absl::AsciiStrToUpper(s); }

// The family of a catalog name: the part before the first '-' ("H100-80GB" -> "H100").
std::string Family(absl::string_view catalog_name) {
  return Upper(catalog_name.substr(0, catalog_name.find('-')));
}

}  // namespace

const MigProfile* GpuModel::FindProfile(absl::string_view profile_name) const {
  int i = ProfileIndex(profile_name);
  return i < 0 ? nullptr : &profiles[i];
}

int GpuModel::ProfileIndex(absl::string_view profile_name) const {
  for (size_t i = 0; i < profiles.size(); ++i) {
    if (profiles[i].name == profile_name) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

const GpuCatalog& GpuCatalog::Default() {
  static const GpuCatalog* const kCatalog = new GpuCatalog(BuiltinModels());
  return *kCatalog;
}

std::string GpuCatalog::KnownNames() const {
  std::vector<std::string> names;
  for (const GpuModel& m : models_) {
    names.push_back(m.name);
  }
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<const GpuModel*> GpuCatalog::Lookup(absl::string_view raw,
                                                   std::optional<int64_t> memory_mib_hint) const {
  std::string name = Upper(absl::StripAsciiWhitespace(raw));
  auto not_found = [&](absl::string_view why) {
    return absl::NotFoundError(absl::StrCat("unknown GPU model \"", raw, "\"", why,
                                            "; known models: ", KnownNames(),
                                            " (or their GPU feature discovery product names)"));
  };
  if (name.empty()) {
    return not_found("");
  }
  // 1. Catalog names and known product names, exactly.
  for (const GpuModel& m : models_) {
    if (Upper(m.name) == name) {
      return &m;
    }
    for (const std::string& p : m.product_names) {
      if (Upper(p) == name) {
        return &m;
      }
    }
  }
  // 2. Product names as GFD writes them, with decorations: "-SHARED" (shared GPUs),
  //    "-MIG-<profile>" (single MIG strategy), vendor prefixes.
  if (absl::EndsWith(name, "-SHARED")) {
    name.resize(name.size() - 7);
  }
  if (size_t mig = name.find("-MIG-"); mig != std::string::npos) {
    name.resize(mig);
  }
  std::vector<std::string> tokens = absl::StrSplit(name, absl::ByAnyChar("- _"), absl::SkipEmpty());
  std::string family;
  std::optional<int> gb;
  bool nvl = false;
  for (const std::string& t : tokens) {
    if (t == "NVIDIA" || t == "TESLA") {
      continue;
    }
    if (family.empty()) {
      for (const GpuModel& m : models_) {
        if (Family(m.name) == t) {
          family = t;
          break;
        }
      }
      if (!family.empty()) {
        continue;
      }
    }
    if (t == "NVL") {
      nvl = true;
    }
    if (t.size() > 2 && absl::EndsWith(t, "GB")) {
      int v = 0;
      if (absl::SimpleAtoi(t.substr(0, t.size() - 2), &v)) {
        gb = v;
      }
    }
  }
  if (family.empty()) {
    return not_found("");
  }
  std::vector<const GpuModel*> candidates;
  for (const GpuModel& m : models_) {
    if (Family(m.name) == family) {
      candidates.push_back(&m);
    }
  }
  if (gb.has_value()) {
    for (const GpuModel* m : candidates) {
      if (absl::StrContains(Upper(m->name), absl::StrCat("-", *gb, "GB"))) {
        return m;
      }
    }
    return not_found(absl::StrCat(" (no ", family, " with ", *gb, "GB)"));
  }
  if (candidates.size() == 1) {
    return candidates[0];
  }
  if (family == "H100") {
    // H100 NVL is the 94GB part; SXM5 and PCIe are 80GB.
    return candidates[nvl ? 1 : 0];
  }
  if (memory_mib_hint.has_value()) {
    const GpuModel* best = nullptr;
    int64_t best_diff = 0;
    for (const GpuModel* m : candidates) {
      int64_t diff = std::llabs(m->memory_bytes / kMiB - *memory_mib_hint);
      if (best == nullptr || diff < best_diff) {
        best = m;
        best_diff = diff;
      }
    }
    return best;
  }
  return not_found(absl::StrCat(" (", family, " comes in several memory sizes; name one, e.g. ",
                                candidates[0]->name, ")"));
}

}  // namespace tessera::model
