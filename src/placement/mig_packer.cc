#include "placement/mig_packer.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>

namespace tessera::placement {

uint64_t MigPacker::Key(const std::vector<int>& counts) const {
  uint64_t key = 0;
  for (int c : counts) {
    key = key * 8 + static_cast<uint64_t>(c);
  }
  return key;
}

bool MigPacker::Feasible(const std::vector<int>& counts) {
  uint64_t key = Key(counts);
  auto it = feasible_.find(key);
  if (it != feasible_.end()) {
    return it->second;
  }
  bool ok = model::FindPlacement(model_, counts).has_value();
  feasible_.emplace(key, ok);
  return ok;
}

int MigPacker::CountGpus(const std::vector<MigGpu>& gpus) {
  int n = 0;
  for (const MigGpu& g : gpus) {
    n += g.repeat;
  }
  return n;
}

std::vector<MigGpu> MigPacker::Pack(const std::vector<int>& demand_in) {
  std::vector<int> demand = demand_in;
  const int n = static_cast<int>(model_.profiles.size());
  // Largest first: memory slices, then compute slices.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const model::MigProfile& pa = model_.profiles[a];
    const model::MigProfile& pb = model_.profiles[b];
    if (pa.memory_slices != pb.memory_slices) {
      return pa.memory_slices > pb.memory_slices;
    }
    return pa.compute_slices > pb.compute_slices;
  });
  std::vector<MigGpu> out;
  while (std::any_of(demand.begin(), demand.end(), [](int d) { return d > 0; })) {
    std::vector<int> counts(n, 0);
    for (int p : order) {
      while (demand[p] > counts[p]) {
        ++counts[p];
        if (!Feasible(counts)) {
          --counts[p];
          break;
        }
      }
    }
    // Every single instance fits an empty GPU, so a composition is never empty.
    int repeat = INT32_MAX;
    for (int p = 0; p < n; ++p) {
      if (counts[p] > 0) {
        repeat = std::min(repeat, demand[p] / counts[p]);
      }
    }
    for (int p = 0; p < n; ++p) {
      demand[p] -= counts[p] * repeat;
    }
    MigGpu gpu;
    gpu.layout = *model::FindPlacement(model_, counts);
    gpu.counts = std::move(counts);
    gpu.repeat = repeat;
    out.push_back(std::move(gpu));
  }
  return out;
}

std::vector<std::vector<int>> MigPacker::PackInstances(const std::vector<Instance>& instances,
                                                       bool spread) {
  const int n = static_cast<int>(instances.size());
  const int num_profiles = static_cast<int>(model_.profiles.size());
  // Largest first; a workload's instances next to each other.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto size_of = [&](int i) {
    const model::MigProfile& p = model_.profiles[instances[i].profile];
    return p.memory_slices * 8 + p.compute_slices;
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (size_of(a) != size_of(b)) {
      return size_of(a) > size_of(b);
    }
    return instances[a].workload < instances[b].workload;
  });
  std::map<int, int> per_workload;
  for (const Instance& inst : instances) {
    ++per_workload[inst.workload];
  }
  std::vector<std::vector<int>> gpus;    // instance indices
  std::vector<std::vector<int>> counts;  // profile counts per GPU
  // Whether placing instance i on GPU g keeps its workload spreadable: a workload with two or
  // more instances may not put all of them on one GPU.
  auto spread_ok_at_end = [&](const std::vector<int>& where) {
    std::map<int, std::pair<int, bool>> seen;  // workload -> (first GPU, spans two)
    for (int k = 0; k < n; ++k) {
      auto [it, fresh] = seen.try_emplace(instances[k].workload, where[k], false);
      if (!fresh && it->second.first != where[k]) {
        it->second.second = true;
      }
    }
    for (const auto& [w, fs] : seen) {
      if (per_workload[w] >= 2 && !fs.second) {
        return false;
      }
    }
    return true;
  };

  if (n <= kExactInstances) {
    std::vector<int> where(n, -1), best_where;
    int best = n + 2;
    long steps = 0;
    std::function<void(int)> dfs = [&](int k) {
      if (++steps > kExactSteps || static_cast<int>(counts.size()) >= best) {
        return;
      }
      if (k == n) {
        if (!spread || spread_ok_at_end(where)) {
          best = static_cast<int>(counts.size());
          best_where = where;
        }
        return;
      }
      int i = order[k];
      bool same_as_prev = k > 0 && instances[order[k - 1]].profile == instances[i].profile &&
                          instances[order[k - 1]].workload == instances[i].workload;
      int from = same_as_prev ? where[order[k - 1]] : 0;
      for (int g = from; g <= static_cast<int>(counts.size()); ++g) {
        bool fresh = g == static_cast<int>(counts.size());
        if (fresh) {
          counts.emplace_back(num_profiles, 0);
        }
        ++counts[g][instances[i].profile];
        if (Feasible(counts[g])) {
          where[i] = g;
          dfs(k + 1);
        }
        --counts[g][instances[i].profile];
        if (fresh) {
          counts.pop_back();
        }
      }
    };
    dfs(0);
    if (!best_where.empty() || n == 0) {
      gpus.assign(best, {});
      for (int i = 0; i < n; ++i) {
        gpus[best_where[i]].push_back(i);
      }
      return gpus;
    }
    counts.clear();
  }
  // First-fit decreasing with anti-affinity for a workload's first two instances.
  std::map<int, int> first_gpu;  // workload -> GPU of its first instance (until spread)
  std::map<int, bool> spread_done;
  for (int i : order) {
    const Instance& inst = instances[i];
    int chosen = -1;
    for (int pass = 0; pass < 2 && chosen < 0; ++pass) {
      for (int g = 0; g < static_cast<int>(counts.size()); ++g) {
        bool avoid = spread && pass == 0 && per_workload[inst.workload] >= 2 &&
                     !spread_done[inst.workload] && first_gpu.count(inst.workload) &&
                     first_gpu[inst.workload] == g;
        if (avoid) {
          continue;
        }
        ++counts[g][inst.profile];
        bool ok = Feasible(counts[g]);
        --counts[g][inst.profile];
        if (ok) {
          chosen = g;
          break;
        }
      }
      if (pass == 0 && chosen < 0 && spread && first_gpu.count(inst.workload) &&
          !spread_done[inst.workload]) {
        break;  // open a new GPU rather than stack the second instance on the first's
      }
    }
    if (chosen < 0) {
      chosen = static_cast<int>(counts.size());
      counts.emplace_back(num_profiles, 0);
      gpus.emplace_back();
    }
    ++counts[chosen][inst.profile];
    gpus[chosen].push_back(i);
    auto [it, fresh] = first_gpu.try_emplace(inst.workload, chosen);
    if (!fresh && it->second != chosen) {
      spread_done[inst.workload] = true;
    }
  }
  return gpus;
}

}  // namespace tessera::placement
