#include "placement/exact_planner.h"

#include <algorithm>
#include <functional>
#include <map>

#include "placement/mig_packer.h"

namespace tessera::placement {
namespace {

// All shapes a workload may take, including every MPS/time-slicing slot count from 2 up to its
// maximum (the planner considers fewer; the optimum may use any).
std::vector<Shape> AllShapes(const model::Workload& w, const model::Pool& pool,
                             const PlannerOptions& options) {
  std::vector<Shape> out;
  for (const Shape& s : CandidateShapes(w, pool, options).shapes) {
    if (s.kind == ShapeKind::kMps || s.kind == ShapeKind::kTimeSlicing) {
      for (int k = 2; k <= s.slots; ++k) {
        Shape t = s;
        t.slots = k;
        t.gpu_fraction = 1.0 / k;
        out.push_back(t);
      }
    } else {
      out.push_back(s);
    }
  }
  return out;
}

// Fewest GPUs holding MIG instances (profile, workload), each workload with two or more
// instances on at least two GPUs. Exhaustive with symmetry breaking.
int MinMigGpus(MigPacker& packer, int num_profiles,
               std::vector<std::pair<int, int>> instances,  // (profile, workload)
               long* steps, long max_steps) {
  if (instances.empty()) {
    return 0;
  }
  std::sort(instances.begin(), instances.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second < b.second : a.first > b.first;
  });
  const int n = static_cast<int>(instances.size());
  int best = n + 1;
  std::vector<std::vector<int>> gpus;  // counts per GPU
  std::vector<int> where(n, -1);
  std::function<void(int)> dfs = [&](int i) {
    if (++*steps > max_steps || static_cast<int>(gpus.size()) >= best) {
      return;
    }
    if (i == n) {
      // Spread: every workload with two or more instances uses two GPUs.
      std::map<int, std::pair<int, int>> first_and_spread;
      for (int k = 0; k < n; ++k) {
        auto [it, fresh] = first_and_spread.try_emplace(instances[k].second, where[k], 0);
        if (!fresh && it->second.first != where[k]) {
          it->second.second = 1;
        }
      }
      std::map<int, int> count;
      for (const auto& inst : instances) {
        ++count[inst.second];
      }
      for (const auto& [w, fs] : first_and_spread) {
        if (count[w] >= 2 && fs.second == 0) {
          return;
        }
      }
      best = static_cast<int>(gpus.size());
      return;
    }
    // Identical instances of one workload take non-decreasing GPUs.
    int from = (i > 0 && instances[i] == instances[i - 1]) ? where[i - 1] : 0;
    for (int g = from; g <= static_cast<int>(gpus.size()); ++g) {
      if (g == static_cast<int>(gpus.size())) {
        gpus.emplace_back(num_profiles, 0);
      }
      ++gpus[g][instances[i].first];
      if (packer.Feasible(gpus[g])) {
        where[i] = g;
        dfs(i + 1);
      }
      --gpus[g][instances[i].first];
      if (g == static_cast<int>(gpus.size()) - 1 &&
          std::all_of(gpus[g].begin(), gpus[g].end(), [](int c) { return c == 0; })) {
        gpus.pop_back();
      }
    }
  };
  dfs(0);
  return best;
}

}  // namespace

std::optional<int> ExactMinGpus(const model::Pool& pool, const model::WorkloadSet& set,
                                const PlannerOptions& options, long max_steps) {
  const int num_workloads = static_cast<int>(set.workloads.size());
  std::vector<std::vector<Shape>> shapes(num_workloads);
  for (int w = 0; w < num_workloads; ++w) {
    shapes[w] = AllShapes(set.workloads[w], pool, options);
    if (shapes[w].empty()) {
      return std::nullopt;
    }
  }
  MigPacker packer(*pool.gpu);
  const int num_profiles = static_cast<int>(pool.gpu->profiles.size());
  long steps = 0;
  int best = INT32_MAX;
  std::vector<int> choice(num_workloads, 0);
  std::map<std::vector<std::pair<int, int>>, int> mig_memo;
  std::function<void(int)> enumerate = [&](int w) {
    if (steps > max_steps) {
      return;
    }
    if (w < num_workloads) {
      for (size_t c = 0; c < shapes[w].size(); ++c) {
        choice[w] = static_cast<int>(c);
        enumerate(w + 1);
      }
      return;
    }
    ++steps;
    int gpus = 0;
    std::map<std::pair<int, int>, std::pair<int, bool>> classes;
    std::vector<std::pair<int, int>> mig;
    for (int i = 0; i < num_workloads; ++i) {
      const Shape& s = shapes[i][choice[i]];
      int r = set.workloads[i].replicas;
      switch (s.kind) {
        case ShapeKind::kExclusive:
          gpus += s.gpus * r;
          break;
        case ShapeKind::kMig:
          for (int k = 0; k < r; ++k) {
            mig.push_back({s.profile, i});
          }
          break;
        case ShapeKind::kMps:
        case ShapeKind::kTimeSlicing: {
          auto& c = classes[{static_cast<int>(s.kind), s.slots}];
          c.first += r;
          c.second |= r >= 2;
          break;
        }
      }
    }
    for (const auto& [key, c] : classes) {
      int g = (c.first + key.second - 1) / key.second;
      gpus += (c.second && g < 2) ? 2 : g;
    }
    if (gpus >= best) {
      return;
    }
    std::sort(mig.begin(), mig.end());
    auto it = mig_memo.find(mig);
    int mig_gpus;
    if (it != mig_memo.end()) {
      mig_gpus = it->second;
    } else {
      mig_gpus = MinMigGpus(packer, num_profiles, mig, &steps, max_steps);
      mig_memo[mig] = mig_gpus;
    }
    best = std::min(best, gpus + mig_gpus);
  };
  enumerate(0);
  if (steps > max_steps) {
    return std::nullopt;
  }
  return best;
}

}  // namespace tessera::placement
