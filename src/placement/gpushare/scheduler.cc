#include "placement/gpushare/scheduler.h"

#include <utility>

namespace tessera::placement::gpushare {

Scheduler::Scheduler(ClusterState& state, Policy& policy, Random& rng, int num_classes,
                     std::vector<int> order, TieBreak ties)
    : state_(state), policy_(policy), rng_(rng), order_(std::move(order)), ties_(ties) {
  if (order_.empty()) {
    for (int n = 0; n < state.size(); ++n) {
      order_.push_back(n);
    }
  }
  cache_.resize(order_.size() * static_cast<size_t>(num_classes));
}

std::optional<Decision> Scheduler::Schedule(const PodSpec& pod, int pod_class) {
  policy_.Observe(pod);
  const uint64_t epoch = policy_.epoch();
  std::pair<int64_t, int64_t> best_score{INT64_MIN, INT64_MIN};
  int ties = 0;
  // One class's entries lie together, in visiting order: the probes read memory in sequence.
  Entry* entries = &cache_[static_cast<size_t>(pod_class) * order_.size()];
  int best_pos = -1;
  for (size_t i = 0; i < order_.size(); ++i) {
    const int n = order_[i];
    Entry& e = entries[i];
    if (e.version != state_.node(n).version || e.epoch != epoch) {
      e.version = state_.node(n).version;
      e.epoch = epoch;
      e.fits = state_.Fits(n, pod);
      e.choice = e.fits ? policy_.Score(state_, n, pod) : Choice{};
    }
    if (!e.fits) {
      continue;
    }
    std::pair<int64_t, int64_t> score{0, 0};
    if (!policy_.uniform_random()) score = {e.choice.score, e.choice.tie};
    if (score > best_score) {
      best_score = score;
      best_pos = static_cast<int>(i);
      ties = 1;
    } else if (score == best_score && (policy_.uniform_random() || ties_ == TieBreak::kRandom) &&
               rng_.UniformInt(0, ties++) == 0) {
      best_pos = static_cast<int>(i);  // reservoir sampling: each tied node equally likely
    }
  }
  if (best_pos < 0) {
    return std::nullopt;
  }
  const int best_node = order_[best_pos];
  Decision d{best_node, entries[best_pos].choice.gpus};
  if (policy_.uniform_random() && pod.sharing()) {
    // Random GPU among those that fit.
    const NodeState& n = state_.node(best_node);
    int seen = 0;
    for (size_t j = 0; j < n.gpu_free.size(); ++j) {
      if (n.gpu_free[j] >= pod.gpu_milli && rng_.UniformInt(0, seen++) == 0) {
        d.gpus = {static_cast<int>(j)};
      }
    }
  }
  state_.Assign(best_node, pod, d.gpus);
  return d;
}

}  // namespace tessera::placement::gpushare
