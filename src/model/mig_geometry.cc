#include "model/mig_geometry.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::model {
namespace {

uint32_t SliceMask(const MigProfile& p, int start) {
  return ((1u << p.memory_slices) - 1u) << start;
}

bool IsLegalStart(const MigProfile& p, int start) {
  return std::find(p.starts.begin(), p.starts.end(), start) != p.starts.end();
}

// Search state shared by FindPlacement and enumeration: occupancy and the counters behind the
// GPU-wide rules.
struct Occupancy {
  uint32_t slices = 0;
  int compute = 0;
  int instances = 0;
  int media = 0;

  bool CanAdd(const GpuModel& m, const MigProfile& p, int start) const {
    return IsLegalStart(p, start) && start + p.memory_slices <= m.mig_memory_slices &&
           (slices & SliceMask(p, start)) == 0 &&
           compute + p.compute_slices <= m.mig_compute_slices &&
           instances + 1 <= m.mig_max_instances && (!p.media_extensions || media == 0);
  }
  void Add(const MigProfile& p, int start) {
    slices |= SliceMask(p, start);
    compute += p.compute_slices;
    ++instances;
    media += p.media_extensions ? 1 : 0;
  }
  void Remove(const MigProfile& p, int start) {
    slices &= ~SliceMask(p, start);
    compute -= p.compute_slices;
    --instances;
    media -= p.media_extensions ? 1 : 0;
  }
};

void SortByStart(MigLayout& layout) {
  std::sort(layout.begin(), layout.end(), [](const MigInstance& a, const MigInstance& b) {
    return a.start != b.start ? a.start < b.start : a.profile < b.profile;
  });
}

}  // namespace

absl::Status ValidateLayout(const GpuModel& model, const MigLayout& layout) {
  if (!model.mig_capable()) {
    return absl::InvalidArgumentError(absl::StrCat(model.name, " does not support MIG"));
  }
  Occupancy occ;
  std::vector<int> counts(model.profiles.size(), 0);
  for (const MigInstance& inst : layout) {
    if (inst.profile < 0 || inst.profile >= static_cast<int>(model.profiles.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile index ", inst.profile, " out of range for ", model.name));
    }
    const MigProfile& p = model.profiles[inst.profile];
    std::string where = absl::StrCat(p.name, "@", inst.start);
    if (!IsLegalStart(p, inst.start)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": start slot ", inst.start, " is not legal for ", p.name,
                       " (legal: ", absl::StrJoin(p.starts, ","), ")"));
    }
    if (inst.start + p.memory_slices > model.mig_memory_slices) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": runs past the last memory slice"));
    }
    if ((occ.slices & SliceMask(p, inst.start)) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": overlaps the memory slices of another instance"));
    }
    if (++counts[inst.profile] > p.max_count) {
      return absl::InvalidArgumentError(
          absl::StrCat("more than ", p.max_count, " instances of ", p.name));
    }
    if (p.media_extensions && occ.media > 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": at most one +me instance per GPU"));
    }
    if (occ.compute + p.compute_slices > model.mig_compute_slices) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": compute slices exceed the GPU's ", model.mig_compute_slices));
    }
    if (occ.instances + 1 > model.mig_max_instances) {
      return absl::InvalidArgumentError(
          absl::StrCat("more than ", model.mig_max_instances, " instances"));
    }
    occ.Add(p, inst.start);
  }
  return absl::OkStatus();
}

std::optional<MigLayout> FindPlacement(const GpuModel& model, const std::vector<int>& counts) {
  if (!model.mig_capable() || counts.size() != model.profiles.size()) {
    return std::nullopt;
  }
  // Place the largest instances first: they have the fewest legal starts.
  std::vector<int> order;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 0 || counts[i] > model.profiles[i].max_count) {
      return std::nullopt;
    }
    for (int k = 0; k < counts[i]; ++k) {
      order.push_back(static_cast<int>(i));
    }
  }
  if (static_cast<int>(order.size()) > model.mig_max_instances) {
    return std::nullopt;
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return model.profiles[a].memory_slices > model.profiles[b].memory_slices;
  });
  Occupancy occ;
  MigLayout layout;
  // Identical profiles take increasing starts, which removes permutations of equal instances.
  std::function<bool(size_t, int)> place = [&](size_t k, int min_start) -> bool {
    if (k == order.size()) {
      return true;
    }
    const MigProfile& p = model.profiles[order[k]];
    for (int s : p.starts) {
      if (s < min_start || !occ.CanAdd(model, p, s)) {
        continue;
      }
      occ.Add(p, s);
      layout.push_back({order[k], s});
      bool same_next = k + 1 < order.size() && order[k + 1] == order[k];
      if (place(k + 1, same_next ? s + 1 : 0)) {
        return true;
      }
      layout.pop_back();
      occ.Remove(p, s);
    }
    return false;
  };
  if (!place(0, 0)) {
    return std::nullopt;
  }
  SortByStart(layout);
  return layout;
}

std::vector<MigLayout> EnumerateMaximalLayouts(const GpuModel& model) {
  std::vector<MigLayout> out;
  if (!model.mig_capable()) {
    return out;
  }
  Occupancy occ;
  MigLayout layout;
  std::vector<int> counts(model.profiles.size(), 0);
  auto can_add_any = [&]() {
    for (size_t i = 0; i < model.profiles.size(); ++i) {
      const MigProfile& p = model.profiles[i];
      if (counts[i] >= p.max_count) {
        continue;
      }
      for (int s : p.starts) {
        if (occ.CanAdd(model, p, s)) {
          return true;
        }
      }
    }
    return false;
  };
  // Instances are generated in canonical order (start, then profile) so each layout once.
  std::function<void(int, int)> grow = [&](int min_start, int min_profile) {
    if (!can_add_any()) {
      out.push_back(layout);
      return;
    }
    for (int s = min_start; s < model.mig_memory_slices; ++s) {
      for (size_t i = (s == min_start ? min_profile : 0); i < model.profiles.size(); ++i) {
        const MigProfile& p = model.profiles[i];
        if (counts[i] >= p.max_count || !occ.CanAdd(model, p, s)) {
          continue;
        }
        occ.Add(p, s);
        ++counts[i];
        layout.push_back({static_cast<int>(i), s});
        grow(s, static_cast<int>(i) + 1);
        layout.pop_back();
        --counts[i];
        occ.Remove(p, s);
      }
    }
  };
  grow(0, 0);
  // Every maximal layout, in canonical order, is reached by adding its instances in that order,
  // and a layout is emitted only when nothing more fits: the output is exactly the maximal set.
  return out;
}

std::vector<int> LayoutCounts(const GpuModel& model, const MigLayout& layout) {
  std::vector<int> counts(model.profiles.size(), 0);
  for (const MigInstance& inst : layout) {
    ++counts[inst.profile];
  }
  return counts;
}

std::string FormatLayout(const GpuModel& model, const MigLayout& layout) {
  return absl::StrJoin(layout, " ", [&](std::string* out, const MigInstance& inst) {
    absl::StrAppend(out, model.profiles[inst.profile].name, "@", inst.start);
  });
}

}  // namespace tessera::model
