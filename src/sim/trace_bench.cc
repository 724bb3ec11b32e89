#include "sim/trace_bench.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "base/random.h"
#include "base/status.h"
#include "placement/gpushare/allocation_bound.h"
#include "placement/gpushare/fragmentation.h"
#include "placement/gpushare/policies.h"
#include "placement/gpushare/scheduler.h"

namespace tessera::sim {
namespace {

using placement::gpushare::ClusterState;
using placement::gpushare::NodeSpec;
using placement::gpushare::PodSpec;

constexpr double kGpuMilliD = static_cast<double>(placement::gpushare::kGpuMilli);

// The trace in the artifact's order before the shuffle: by pod name.
void SortByName(std::vector<PodSpec>& pods) {
  std::sort(pods.begin(), pods.end(),
            [](const PodSpec& a, const PodSpec& b) { return a.name < b.name; });
}

// The arrivals of a run, as indices into `pods` (sorted by name): the trace shuffled by `rng`,
// then inflated by uniform resampling until the GPU requests reach `inflate` x `capacity` (milli),
// or deflated by dropping arrivals at random until they are within it.
absl::StatusOr<std::vector<int>> ArrivalOrder(const std::vector<PodSpec>& pods, double capacity,
                                              double inflate, Random& rng) {
  std::vector<int> order(pods.size());
  for (size_t i = 0; i < order.size(); ++i) {
    order[i] = static_cast<int>(i);
  }
  rng.Shuffle(order);
  const double goal = inflate * capacity;
  double requested = 0;
  for (const PodSpec& p : pods) {
    requested += static_cast<double>(p.gpu_request());
  }
  // Arrivals are counted in GPU capacity: without GPUs, or without GPU pods to draw, inflation
  // would never reach its goal.
  if (capacity <= 0 || requested <= 0 || !(inflate > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trace-bench needs GPUs on the nodes (", capacity / 1000, "), pods asking for them (",
        requested / 1000, " GPUs) and an inflation above 0 (", inflate, ")"));
  }
  if (requested <= goal) {
    while (true) {
      int i = static_cast<int>(rng.UniformInt(0, static_cast<int64_t>(pods.size()) - 1));
      if (requested + static_cast<double>(pods[i].gpu_milli) > goal) {
        break;
      }
      order.push_back(i);
      requested += static_cast<double>(pods[i].gpu_request());
    }
  } else {
    while (requested > goal && !order.empty()) {
      size_t k = static_cast<size_t>(rng.UniformInt(0, static_cast<int64_t>(order.size()) - 1));
      requested -= static_cast<double>(pods[order[k]].gpu_request());
      order.erase(order.begin() + static_cast<long>(k));
    }
  }
  return order;
}

// The samples each arrived bucket 0..kMaxBucket averages, by index into `arrived` (the arrived %
// of capacity at each sample, in order): those whose arrived % rounds to the bucket; for an empty
// bucket those within +-1 of it, or else (a coarse trace) the last at or below it.
std::vector<std::vector<size_t>> BucketSamples(const std::vector<double>& arrived) {
  std::vector<std::vector<size_t>> buckets(kMaxBucket + 1);
  for (size_t i = 0; i < arrived.size(); ++i) {
    buckets[std::clamp(RoundHalfEven(arrived[i]), 0, kMaxBucket)].push_back(i);
  }
  for (int b = 0; b <= kMaxBucket; ++b) {
    std::vector<size_t>& use = buckets[b];
    if (!use.empty()) continue;
    for (size_t i = 0; i < arrived.size(); ++i) {
      if (std::fabs(arrived[i] - b) <= 1.0) use.push_back(i);
    }
    if (!use.empty()) continue;
    size_t last = 0;
    for (size_t i = 0; i < arrived.size(); ++i) {
      if (arrived[i] <= b) last = i;
    }
    use.push_back(last);
  }
  return buckets;
}

}  // namespace

Unallocated AccountUnallocated(const ClusterState& state,
                               const std::set<std::pair<int64_t, int64_t>>& asks,
                               double arrived_pct) {
  // The asks no other ask undercuts in both CPU and memory: a node fits some ask iff it fits one
  // of these. Sorted by CPU, each kept one needs less memory than every one before it.
  std::vector<std::pair<int64_t, int64_t>> minimal;
  for (const auto& a : asks) {
    if (minimal.empty() || a.second < minimal.back().second) minimal.push_back(a);
  }
  Unallocated u;
  u.arrived_pct = arrived_pct;
  u.unallocated =
      static_cast<double>(state.total_gpu_milli() - state.used_gpu_milli()) / kGpuMilliD;
  for (int n = 0; n < state.size(); ++n) {
    const placement::gpushare::NodeState& node = state.node(n);
    const bool fits = std::any_of(minimal.begin(), minimal.end(), [&](const auto& ask) {
      return ask.first <= node.cpu_free && ask.second <= node.memory_free;
    });
    for (int64_t free : node.gpu_free) {
      if (free == 0) continue;
      const double gpus = static_cast<double>(free) / kGpuMilliD;
      if (!fits) {
        u.stranded += gpus;
      } else if (free >= placement::gpushare::kGpuMilli) {
        u.whole += gpus;
      } else {
        u.partial[static_cast<size_t>(free / 100)] += gpus;
      }
    }
  }
  return u;
}

double Unallocated::failed_gpus() const {
  double sum = 0;
  for (const auto& [ask, count] : failed) sum += count.second;
  return sum;
}

double Unallocated::free_gpus() const {
  double sum = stranded + whole;
  for (double p : partial) sum += p;
  return sum;
}

absl::StatusOr<PairedDifference> ComparePaired(const std::vector<RunResult>& runs,
                                               const std::string& policy,
                                               const std::string& baseline, int bucket) {
  if (bucket < 0 || bucket > kMaxBucket) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket ", bucket, " is outside 0..", kMaxBucket));
  }
  std::map<uint64_t, double> base;
  for (const RunResult& r : runs) {
    if (r.policy == baseline) base[r.seed] = r.alloc_pct[bucket];
  }
  std::vector<double> diffs;
  PairedDifference out;
  for (const RunResult& r : runs) {
    auto it = r.policy == policy ? base.find(r.seed) : base.end();
    if (it == base.end()) continue;
    const double d = r.alloc_pct[bucket] - it->second;
    diffs.push_back(d);
    out.ahead += d > 0;
    out.behind += d < 0;
  }
  if (diffs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no seed was run with both ", policy, " and ", baseline));
  }
  out.seeds = static_cast<int>(diffs.size());
  for (double d : diffs) out.mean += d / out.seeds;
  if (out.seeds > 1) {
    double ss = 0;
    for (double d : diffs) ss += (d - out.mean) * (d - out.mean);
    out.std_error = std::sqrt(ss / (out.seeds - 1) / out.seeds);
  }
  return out;
}

int RoundHalfEven(double x) {
  double r = std::nearbyint(x);  // default rounding mode: to nearest, ties to even
  return static_cast<int>(r);
}

absl::StatusOr<RunResult> RunTraceBench(const std::vector<NodeSpec>& nodes,
                                        std::vector<PodSpec> pods, const std::string& policy_name,
                                        uint64_t seed, double inflate,
                                        placement::gpushare::TieBreak ties) {
  const double start = ProcessCpuSeconds();
  SortByName(pods);
  const placement::gpushare::TargetWorkload target = placement::gpushare::BuildTargetWorkload(pods);
  absl::StatusOr<std::unique_ptr<placement::gpushare::Policy>> policy =
      placement::gpushare::MakePolicy(policy_name, target);
  if (!policy.ok()) {
    return policy.status();
  }
  ClusterState state(nodes);
  Random rng(seed);

  // Order: the name-sorted trace shuffled; then inflation draws from the name-sorted trace.
  const double capacity = static_cast<double>(state.total_gpu_milli());
  absl::StatusOr<std::vector<int>> arrivals = ArrivalOrder(pods, capacity, inflate, rng);
  if (!arrivals.ok()) return arrivals.status();
  const std::vector<int>& order = *arrivals;

  // Pod classes for the score cache: equal requests and allowed models.
  std::map<PodSpec::RequestKey, int> class_ids;
  std::vector<int> class_of(pods.size());
  for (size_t i = 0; i < pods.size(); ++i) {
    auto [it, fresh] =
        class_ids.try_emplace(pods[i].request_key(), static_cast<int>(class_ids.size()));
    class_of[i] = it->second;
  }
  // Node order: a random permutation per seed (the artifact prefixes node names randomly).
  std::vector<int> node_order(state.size());
  for (int n = 0; n < state.size(); ++n) {
    node_order[n] = n;
  }
  rng.Shuffle(node_order);
  placement::gpushare::Scheduler scheduler(state, **policy, rng, static_cast<int>(class_ids.size()),
                                           node_order, ties);

  // Fragmentation, kept per node and summed incrementally.
  std::vector<double> node_frag(state.size());
  double frag = 0;
  for (int n = 0; n < state.size(); ++n) {
    node_frag[n] = placement::gpushare::NodeFragmentation(state, state.node(n), target);
    frag += node_frag[n];
  }

  struct Sample {
    double arrived, alloc, frag;
  };
  std::vector<Sample> samples;
  samples.push_back({0, 0, 100.0 * frag / capacity});
  RunResult result;
  result.policy = policy_name;
  result.seed = seed;
  double arrived = 0;
  std::set<std::pair<int64_t, int64_t>> gpu_pod_asks;  // (CPU, memory) of arrived GPU pods
  std::map<std::pair<int, int64_t>, std::pair<int, double>> failed_by_ask;
  bool accounted = false;
  auto account = [&] {
    accounted = true;
    result.at_full = AccountUnallocated(state, gpu_pod_asks, 100.0 * arrived / capacity);
    result.at_full.failed = failed_by_ask;
  };
  for (int i : order) {
    const PodSpec& pod = pods[i];
    arrived += static_cast<double>(pod.gpu_request());
    if (pod.num_gpu > 0) gpu_pod_asks.emplace(pod.cpu_milli, pod.memory_mib);
    std::optional<placement::gpushare::Decision> d = scheduler.Schedule(pod, class_of[i]);
    if (!d.has_value()) {
      ++result.failed_pods;
      auto& f = failed_by_ask[{pod.num_gpu, pod.gpu_milli}];
      ++f.first;
      f.second += static_cast<double>(pod.gpu_request()) / kGpuMilliD;
    } else {
      frag -= node_frag[d->node];
      node_frag[d->node] =
          placement::gpushare::NodeFragmentation(state, state.node(d->node), target);
      frag += node_frag[d->node];
    }
    if (!accounted && arrived >= capacity) account();
    samples.push_back({100.0 * arrived / capacity,
                       100.0 * static_cast<double>(state.used_gpu_milli()) / capacity,
                       100.0 * frag / capacity});
  }
  result.pods = static_cast<int>(order.size());
  if (!accounted) account();  // fewer arrivals than capacity: after the last one

  // Buckets: mean of the samples whose arrived % rounds to the bucket (BucketSamples).
  std::vector<double> arrived_pct;
  arrived_pct.reserve(samples.size());
  for (const Sample& s : samples) arrived_pct.push_back(s.arrived);
  const std::vector<std::vector<size_t>> buckets = BucketSamples(arrived_pct);
  for (int b = 0; b <= kMaxBucket; ++b) {
    double a = 0, f = 0;
    for (size_t i : buckets[b]) {
      a += samples[i].alloc;
      f += samples[i].frag;
    }
    result.alloc_pct[b] = a / static_cast<double>(buckets[b].size());
    result.frag_pct[b] = f / static_cast<double>(buckets[b].size());
  }
  result.runtime_s = ProcessCpuSeconds() - start;
  return result;
}

absl::StatusOr<std::map<int, double>> BoundTraceBench(const std::vector<NodeSpec>& nodes,
                                                      std::vector<PodSpec> pods, uint64_t seed,
                                                      double inflate,
                                                      const std::vector<int>& buckets) {
  // The arrivals exactly as RunTraceBench draws them: the same sort, and the same generator
  // consumed the same way up to the last arrival.
  SortByName(pods);
  const int64_t milli = ClusterState(nodes).total_gpu_milli();  // as RunTraceBench counts it
  const int64_t gpus = milli / placement::gpushare::kGpuMilli;
  const double capacity = static_cast<double>(milli);
  Random rng(seed);
  TESSERA_ASSIGN_OR_RETURN(std::vector<int> order, ArrivalOrder(pods, capacity, inflate, rng));
  std::vector<double> arrived_pct = {0};
  double arrived = 0;
  for (int i : order) {
    arrived += static_cast<double>(pods[i].gpu_request());
    arrived_pct.push_back(100.0 * arrived / capacity);
  }
  const std::vector<std::vector<size_t>> used = BucketSamples(arrived_pct);
  // A bucket's allocation is the mean over its samples (states after the first `i` arrivals), so
  // the mean of their bounds bounds it. Each sample's bound is computed once, in order.
  std::map<size_t, double> bound_at;  // by sample
  for (int b : buckets) {
    if (b < 0 || b > kMaxBucket) {
      return absl::InvalidArgumentError(absl::StrCat("bucket ", b, " is outside 0..", kMaxBucket));
    }
    for (size_t i : used[b]) bound_at[i] = 0;
  }
  std::map<int64_t, int64_t> shares;                   // of the pods arrived so far
  std::vector<placement::gpushare::Filling> fillings;  // the last bound's, to start the next
  size_t next = 0;
  for (auto& [sample, pct] : bound_at) {
    for (; next < sample; ++next) {
      const PodSpec& p = pods[order[next]];
      if (p.num_gpu > 0) shares[p.gpu_milli] += p.num_gpu;
    }
    pct = 100.0 * placement::gpushare::BoundSharedAllocation(shares, gpus, &fillings).gpus /
          static_cast<double>(gpus);
  }
  std::map<int, double> out;
  for (int b : buckets) {
    double sum = 0;
    for (size_t i : used[b]) sum += bound_at[i];
    out[b] = sum / static_cast<double>(used[b].size());
  }
  return out;
}

}  // namespace tessera::sim
