#include "placement/gpushare/fragmentation.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace tessera::placement::gpushare {

TargetWorkload BuildTargetWorkload(const std::vector<PodSpec>& pods, double coverage, int step) {
  using Key = std::tuple<int64_t, int64_t, int, std::vector<std::string>>;
  std::map<Key, int64_t> counts;
  for (const PodSpec& p : pods) {
    ++counts[Key(p.cpu_milli, p.gpu_milli, p.num_gpu, p.gpu_spec)];
  }
  std::vector<std::pair<Key, int64_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  const double total = static_cast<double>(pods.size());
  TargetWorkload out;
  int64_t covered = 0;
  size_t taken = 0;
  while (taken < sorted.size() && covered < coverage * total) {
    for (int i = 0; i < step && taken < sorted.size(); ++i, ++taken) {
      covered += sorted[taken].second;
    }
  }
  for (size_t i = 0; i < taken; ++i) {
    const auto& [key, count] = sorted[i];
    TaskClass c;
    c.cpu_milli = std::get<0>(key);
    c.gpu_milli = std::get<1>(key);
    c.num_gpu = std::get<2>(key);
    c.gpu_spec = std::get<3>(key);
    c.count = count;
    c.weight = static_cast<double>(count) / static_cast<double>(covered);
    out.classes.push_back(std::move(c));
  }
  return out;
}

double NodeFragmentation(const ClusterState& state, const NodeState& n,
                         const TargetWorkload& target) {
  const int64_t free_total = n.gpu_free_total();
  if (free_total == 0) {
    return 0;
  }
  double f = 0;
  for (const TaskClass& m : target.classes) {
    bool runs =
        m.gpu_milli > 0 && state.ModelAllowed(n.model, m.gpu_spec) && n.cpu_free >= m.cpu_milli;
    int64_t slivers = 0;
    if (runs) {
      int room = 0;
      for (int64_t g : n.gpu_free) {
        if (g >= m.gpu_milli) {
          ++room;
        } else {
          slivers += g;
        }
      }
      runs = room >= m.num_gpu;
    }
    f += m.weight * static_cast<double>(runs ? slivers : free_total);
  }
  return f;
}

}  // namespace tessera::placement::gpushare
