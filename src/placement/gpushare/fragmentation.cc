#include "placement/gpushare/fragmentation.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace tessera::placement::gpushare {

TargetWorkload BuildTargetWorkload(const std::vector<PodSpec>& pods, double coverage, int step) {
  TaskClassCounts counts;
  for (const PodSpec& p : pods) counts.Add(p);
  return counts.Build(coverage, step);
}

void TaskClassCounts::Add(const PodSpec& p) {
  ++counts_[Key(p.cpu_milli, p.gpu_milli, p.num_gpu, p.gpu_spec)];
  ++total_;
}

TargetWorkload TaskClassCounts::Build(double coverage, int step) const {
  std::vector<std::pair<Key, int64_t>> sorted(counts_.begin(), counts_.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  const double total = static_cast<double>(total_);
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
  out.Index();
  return out;
}

void TargetWorkload::Index() {
  shares.clear();
  specs.clear();
  groups.clear();
  cpu_only_weight = 0;
  std::map<std::tuple<int, int, std::vector<std::string>>, std::vector<std::pair<int64_t, double>>>
      by_group;
  for (const TaskClass& c : classes) {
    if (c.gpu_milli <= 0) {
      cpu_only_weight += c.weight;
      continue;
    }
    auto it = std::find(shares.begin(), shares.end(), c.gpu_milli);
    const int s = static_cast<int>(it - shares.begin());
    if (it == shares.end()) {
      shares.push_back(c.gpu_milli);
    }
    by_group[{s, c.num_gpu, c.gpu_spec}].emplace_back(c.cpu_milli, c.weight);
  }
  for (auto& [key, members] : by_group) {
    std::stable_sort(members.begin(), members.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    Group g;
    const auto& [share, num_gpu, gpu_spec] = key;
    g.share = share;
    g.num_gpu = num_gpu;
    auto spec = std::find(specs.begin(), specs.end(), gpu_spec);
    g.spec = static_cast<int>(spec - specs.begin());
    if (spec == specs.end()) specs.push_back(gpu_spec);
    g.weight_upto.push_back(0);
    for (const auto& [cpu, weight] : members) {
      g.cpu_milli.push_back(cpu);
      g.weight_upto.push_back(g.weight_upto.back() + weight);
    }
    groups.push_back(std::move(g));
  }
  indexed_classes = classes.size();
}

double NodeFragmentation(const ClusterState& state, const NodeState& n,
                         const TargetWorkload& target) {
  const int64_t free_total = n.gpu_free_total();
  if (free_total == 0) {
    return 0;
  }
  if (target.indexed_classes != target.classes.size()) {
    TargetWorkload indexed = target;  // built by hand (tests): index a copy
    indexed.Index();
    return NodeFragmentation(state, n, indexed);
  }
  // Per distinct share: GPUs with room for it, and free slivers too small for it.
  constexpr size_t kStack = 64;
  int room_stack[kStack];
  int64_t sliver_stack[kStack];
  char allowed_stack[kStack];
  std::vector<int> room_heap;
  std::vector<int64_t> sliver_heap;
  std::vector<char> allowed_heap;
  int* room = room_stack;
  int64_t* sliver = sliver_stack;
  char* allowed = allowed_stack;
  if (target.shares.size() > kStack) {
    room_heap.resize(target.shares.size());
    sliver_heap.resize(target.shares.size());
    room = room_heap.data();
    sliver = sliver_heap.data();
  }
  if (target.specs.size() > kStack) {
    allowed_heap.resize(target.specs.size());
    allowed = allowed_heap.data();
  }
  for (size_t s = 0; s < target.specs.size(); ++s) {
    allowed[s] = state.ModelAllowed(n.model, target.specs[s]);
  }
  for (size_t s = 0; s < target.shares.size(); ++s) {
    room[s] = 0;
    sliver[s] = 0;
    for (int64_t g : n.gpu_free) {
      if (g >= target.shares[s]) {
        ++room[s];
      } else {
        sliver[s] += g;
      }
    }
  }
  // A class runs on the node when it has CPU, GPUs with room and an allowed model; its
  // fragment is then the slivers too small for it, else all the free GPU.
  const double all_free = static_cast<double>(free_total);
  double f = target.cpu_only_weight * all_free;
  for (const TargetWorkload::Group& g : target.groups) {
    const double total = g.weight_upto.back();
    if (room[g.share] < g.num_gpu || !allowed[g.spec]) {
      f += total * all_free;
      continue;
    }
    const size_t fit =
        std::upper_bound(g.cpu_milli.begin(), g.cpu_milli.end(), n.cpu_free) - g.cpu_milli.begin();
    const double runs = g.weight_upto[fit];
    f += runs * static_cast<double>(sliver[g.share]) + (total - runs) * all_free;
  }
  return f;
}

}  // namespace tessera::placement::gpushare
