#include "placement/mig_packer.h"

#include <algorithm>
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

}  // namespace tessera::placement
