#include "placement/shapes.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/units.h"

namespace tessera::placement {
namespace {

using model::Isolation;

// Shapes of equal cost: the better isolated first.
int Preference(ShapeKind k) {
  switch (k) {
    case ShapeKind::kMig:
      return 0;
    case ShapeKind::kMps:
      return 1;
    case ShapeKind::kTimeSlicing:
      return 2;
    case ShapeKind::kExclusive:
      return 3;
  }
  return 4;
}

double MigFraction(const model::GpuModel& m, const model::MigProfile& p) {
  return std::max(static_cast<double>(p.memory_slices) / m.mig_memory_slices,
                  static_cast<double>(p.compute_slices) / m.mig_compute_slices);
}

}  // namespace

int SmallestMigProfile(const model::Pool& pool, int64_t memory_bytes, int64_t compute_milli) {
  if (!pool.mig_allowed || pool.gpu == nullptr) {
    return -1;
  }
  const model::GpuModel& m = *pool.gpu;
  int best = -1;
  for (size_t i = 0; i < m.profiles.size(); ++i) {
    const model::MigProfile& p = m.profiles[i];
    // Media-extension profiles are scarce (one per GPU) and no input asks for media engines.
    if (p.media_extensions || p.memory_bytes < memory_bytes ||
        int64_t{p.compute_slices} * 1000 < compute_milli * m.mig_compute_slices) {
      continue;
    }
    if (best < 0) {
      best = static_cast<int>(i);
      continue;
    }
    const model::MigProfile& b = m.profiles[best];
    double fp = MigFraction(m, p), fb = MigFraction(m, b);
    if (fp < fb || (fp == fb && p.compute_slices < b.compute_slices)) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

int MaxSlots(int64_t gpu_memory_bytes, int64_t memory_bytes, int64_t compute_milli,
             double compute_cap, int max_slots) {
  int64_t by_memory = memory_bytes > 0 ? gpu_memory_bytes / memory_bytes : max_slots;
  int64_t by_compute =
      compute_milli > 0
          ? static_cast<int64_t>(std::floor(compute_cap * 1000.0 / compute_milli + 1e-9))
          : max_slots;
  return static_cast<int>(std::min<int64_t>({by_memory, by_compute, max_slots}));
}

ShapeChoice CandidateShapes(const model::Workload& w, const model::Pool& pool,
                            const PlannerOptions& options) {
  ShapeChoice out;
  const model::GpuModel& m = *pool.gpu;
  if (!w.Allows(m)) {
    out.reason = absl::StrCat("pool ", pool.name, " has ", m.name, ", not an allowed model");
    return out;
  }
  if (int n = w.whole_gpus(); n > 0) {
    if (n > pool.gpus_per_node) {
      out.reason = absl::StrCat("needs ", n, " GPUs on one node; pool ", pool.name, " has ",
                                pool.gpus_per_node, " per node");
      return out;
    }
    int64_t per_gpu = (w.memory_bytes + n - 1) / n;
    if (per_gpu > pool.gpu_memory_bytes) {
      out.reason = absl::StrCat("needs ", FormatGiB(per_gpu), " per GPU over ", n, " GPUs; ",
                                m.name, " has ", FormatGiB(pool.gpu_memory_bytes));
      return out;
    }
    Shape s;
    s.kind = ShapeKind::kExclusive;
    s.gpus = n;
    s.gpu_fraction = n;
    out.shapes.push_back(s);
    return out;
  }
  if (w.memory_bytes > pool.gpu_memory_bytes) {
    out.reason = absl::StrCat("needs ", FormatGiB(w.memory_bytes), " but ", m.name, " has ",
                              FormatGiB(pool.gpu_memory_bytes),
                              " per GPU (set gpuCompute to a whole number of GPUs to spread a "
                              "replica over several)");
    return out;
  }
  Shape exclusive;
  exclusive.kind = ShapeKind::kExclusive;
  out.shapes.push_back(exclusive);
  if (int p = SmallestMigProfile(pool, w.memory_bytes, w.compute_milli); p >= 0) {
    Shape s;
    s.kind = ShapeKind::kMig;
    s.profile = p;
    s.gpu_fraction = MigFraction(m, m.profiles[p]);
    if (s.gpu_fraction < 1.0) {
      out.shapes.push_back(s);
    }
  }
  // MPS and time-slicing at the most slots the replica fits (a one-slot share is no share).
  auto add_slots = [&](ShapeKind kind, double compute_cap) {
    int k = MaxSlots(pool.gpu_memory_bytes, w.memory_bytes, w.compute_milli, compute_cap,
                     options.max_slots);
    if (k >= 2) {
      Shape s;
      s.kind = kind;
      s.slots = k;
      s.gpu_fraction = 1.0 / k;
      out.shapes.push_back(s);
    }
  };
  if (options.allow_mps && w.isolation != Isolation::kFull) {
    add_slots(ShapeKind::kMps, 1.0);
  }
  if (options.allow_time_slicing && w.isolation == Isolation::kNone) {
    add_slots(ShapeKind::kTimeSlicing, options.time_slicing_oversubscription);
  }
  std::stable_sort(out.shapes.begin(), out.shapes.end(), [](const Shape& a, const Shape& b) {
    if (a.gpu_fraction != b.gpu_fraction) {
      return a.gpu_fraction < b.gpu_fraction;
    }
    return Preference(a.kind) < Preference(b.kind);
  });
  return out;
}

bool ShapeFits(const model::Workload& w, const model::Pool& pool, const Shape& shape,
               const PlannerOptions& options, std::string* why) {
  auto fail = [&](std::string msg) {
    *why = std::move(msg);
    return false;
  };
  const model::GpuModel& m = *pool.gpu;
  if (!w.Allows(m)) {
    return fail(absl::StrCat(m.name, " is not an allowed model"));
  }
  if (w.whole_gpus() > 0 && (shape.kind != ShapeKind::kExclusive || shape.gpus != w.whole_gpus())) {
    return fail(absl::StrCat("an N-GPU replica needs exclusive ", w.whole_gpus(), " GPUs"));
  }
  switch (shape.kind) {
    case ShapeKind::kExclusive:
      if ((w.memory_bytes + shape.gpus - 1) / shape.gpus > pool.gpu_memory_bytes) {
        return fail("memory exceeds the GPU");
      }
      return true;
    case ShapeKind::kMig: {
      if (!pool.mig_allowed || shape.profile < 0 ||
          shape.profile >= static_cast<int>(m.profiles.size())) {
        return fail("no such MIG profile on this pool");
      }
      const model::MigProfile& p = m.profiles[shape.profile];
      if (p.memory_bytes < w.memory_bytes) {
        return fail(absl::StrCat(p.name, " has ", FormatGiB(p.memory_bytes), " < ",
                                 FormatGiB(w.memory_bytes)));
      }
      if (int64_t{p.compute_slices} * 1000 < w.compute_milli * m.mig_compute_slices) {
        return fail(absl::StrCat(p.name, " has too little compute"));
      }
      return true;
    }
    case ShapeKind::kMps:
    case ShapeKind::kTimeSlicing: {
      bool mps = shape.kind == ShapeKind::kMps;
      if (mps && w.isolation == model::Isolation::kFull) {
        return fail("full isolation forbids MPS");
      }
      if (!mps && w.isolation != model::Isolation::kNone) {
        return fail("time-slicing gives no memory isolation");
      }
      double cap = mps ? 1.0 : options.time_slicing_oversubscription;
      if (shape.slots < 2 || MaxSlots(pool.gpu_memory_bytes, w.memory_bytes, w.compute_milli, cap,
                                      1 << 20) < shape.slots) {
        return fail(absl::StrCat("does not fit a 1/", shape.slots, " slot"));
      }
      return true;
    }
  }
  return fail("unknown shape");
}

}  // namespace tessera::placement
