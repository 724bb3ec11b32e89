#include "placement/gpushare/policies.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "placement/gpushare/tessera_policy.h"

namespace tessera::placement::gpushare {
namespace {

// Node capacity scales used by the published BestFit score.
constexpr double kMaxSpecCpuMilli = 128000;
constexpr double kMaxSpecGpuMilli = 8000;

class RandomPolicy final : public Policy {
 public:
  std::string name() const override { return "random"; }
  Choice Score(const ClusterState& state, int node, const PodSpec& pod) const override {
    return {100, BestFitGpus(state.node(node), pod)};
  }
  bool uniform_random() const override { return true; }
};

// 100 x (1 - [0.5 (free CPU - request) / 128000 + 0.5 (free GPU - request) / 8000]),
// truncated; GPUs by best fit.
class BestFitPolicy final : public Policy {
 public:
  std::string name() const override { return "bestfit"; }
  Choice Score(const ClusterState& state, int node, const PodSpec& pod) const override {
    const NodeState& n = state.node(node);
    double left =
        0.5 * static_cast<double>(n.cpu_free - pod.cpu_milli) / kMaxSpecCpuMilli +
        0.5 * static_cast<double>(n.gpu_free_total() - pod.gpu_request()) / kMaxSpecGpuMilli;
    return {static_cast<int64_t>((1.0 - left) * 100.0), BestFitGpus(n, pod)};
  }
};

// Fragmentation gradient descent: the placement (node, and GPU for a sharing pod) that grows
// the node's fragmentation least; score trunc(100 sigmoid(-delta / 1000)).
class FgdPolicy final : public Policy {
 public:
  explicit FgdPolicy(TargetWorkload target) : target_(std::move(target)) {}
  std::string name() const override { return "fgd"; }
  Choice Score(const ClusterState& state, int node, const PodSpec& pod) const override {
    return FgdChoice(state, node, pod, target_);
  }

 private:
  TargetWorkload target_;
};

// Tetris' dot product on (CPU, total GPU), each scaled by the largest node's capacity:
// 100 x (1 - dot / 2), truncated; a smaller dot product (a tighter fit) scores higher.
class DotProdPolicy final : public Policy {
 public:
  std::string name() const override { return "dotprod"; }
  Choice Score(const ClusterState& state, int node, const PodSpec& pod) const override {
    const NodeState& n = state.node(node);
    double dot = (static_cast<double>(n.cpu_free) / kMaxSpecCpuMilli) *
                     (static_cast<double>(pod.cpu_milli) / kMaxSpecCpuMilli) +
                 (static_cast<double>(n.gpu_free_total()) / kMaxSpecGpuMilli) *
                     (static_cast<double>(pod.gpu_request()) / kMaxSpecGpuMilli);
    return {static_cast<int64_t>(100.0 * (1.0 - dot / 2.0)), BestFitGpus(n, pod)};
  }
};

// GPU packing: prefer sharing already-used GPUs (score 50-100, fuller GPUs higher), then fully
// free GPUs on a used node (33-50), then an idle node (0-33); CPU-only pods score 0 everywhere.
class PackingPolicy final : public Policy {
 public:
  std::string name() const override { return "packing"; }
  Choice Score(const ClusterState& state, int node, const PodSpec& pod) const override {
    const NodeState& n = state.node(node);
    std::vector<int> gpus = BestFitGpus(n, pod);
    if (pod.num_gpu == 0) {
      return {0, gpus};
    }
    int64_t fully_free = 0;
    for (int64_t g : n.gpu_free) {
      fully_free += g == kGpuMilli ? 1 : 0;
    }
    if (fully_free == static_cast<int64_t>(n.gpu_free.size())) {
      return {std::max<int64_t>(100 / 3 - fully_free, fully_free), gpus};
    }
    // The GPUs it would use: least free first.
    std::vector<int> by_free(n.gpu_free.size());
    for (size_t j = 0; j < by_free.size(); ++j) {
      by_free[j] = static_cast<int>(j);
    }
    std::stable_sort(by_free.begin(), by_free.end(),
                     [&](int a, int b) { return n.gpu_free[a] < n.gpu_free[b]; });
    int want = pod.num_gpu;
    int64_t fully_free_used = 0;
    int64_t free_pct = 0;
    for (int j : by_free) {
      if (want == 0) {
        break;
      }
      if (n.gpu_free[j] >= pod.gpu_milli) {
        --want;
        fully_free_used += n.gpu_free[j] == kGpuMilli ? 1 : 0;
        free_pct += n.gpu_free[j] * 100 / kGpuMilli;
      }
    }
    if (fully_free_used > 0) {
      return {std::max<int64_t>(100 / 2 - fully_free_used, 100 / 3), gpus};
    }
    return {std::max<int64_t>(100 - free_pct / 10, 100 / 2), gpus};
  }
};

// GPU clustering: keep pods of one request type ("share", "k-gpu") together: nodes holding only
// that type (75-100], mixed including it (50-75], idle (25-50], only other types (0-25];
// within a band fuller nodes score higher. CPU-only pods score 0.
class ClusteringPolicy final : public Policy {
 public:
  std::string name() const override { return "clustering"; }
  Choice Score(const ClusterState& state, int node, const PodSpec& pod) const override {
    const NodeState& n = state.node(node);
    std::vector<int> gpus = BestFitGpus(n, pod);
    if (pod.num_gpu == 0) {
      return {0, gpus};
    }
    int mine = pod.sharing() ? 0 : std::min(pod.num_gpu, 8);
    int kinds = 0;
    for (int c : n.affinity) {
      kinds += c > 0 ? 1 : 0;
    }
    // Integer arithmetic as published: 25 x (8000 - free) / 8000 + band.
    int64_t fill = 100 / 4 * (8000 - n.gpu_free_total()) / 8000;
    int64_t band;
    if (n.affinity[mine] > 0) {
      band = kinds == 1 ? 100 * 3 / 4 : 100 * 2 / 4;
    } else {
      band = kinds == 0 ? 100 / 4 : 0;
    }
    return {fill + band, gpus};
  }
};

}  // namespace

Choice FgdChoice(const ClusterState& state, int node, const PodSpec& pod,
                 const TargetWorkload& target) {
  const NodeState& n = state.node(node);
  const double before = NodeFragmentation(state, n, target);
  NodeState after = n;
  after.cpu_free -= pod.cpu_milli;
  after.memory_free -= pod.memory_mib;
  auto score_of = [&](const NodeState& s) {
    double delta = NodeFragmentation(state, s, target) - before;
    return static_cast<int64_t>(100.0 / (1.0 + std::exp(delta / 1000.0)));
  };
  if (pod.sharing()) {
    // Every GPU with room; the best score wins, the first GPU on ties. The fragmentation depends
    // on the node's free GPU values, not on which GPU holds which, so GPUs as free as one
    // already tried score the same: only the first of each is scored.
    Choice best{-1, {}};
    for (size_t j = 0; j < n.gpu_free.size(); ++j) {
      if (n.gpu_free[j] < pod.gpu_milli || std::find(n.gpu_free.begin(), n.gpu_free.begin() + j,
                                                     n.gpu_free[j]) != n.gpu_free.begin() + j) {
        continue;
      }
      after.gpu_free[j] -= pod.gpu_milli;
      int64_t s = score_of(after);
      after.gpu_free[j] += pod.gpu_milli;
      if (s > best.score) {
        best = {s, {static_cast<int>(j)}};
      }
    }
    return best;
  }
  std::vector<int> gpus = BestFitGpus(n, pod);  // lowest-index fully free GPUs
  for (int g : gpus) {
    after.gpu_free[g] -= pod.gpu_milli;
  }
  return {score_of(after), gpus};
}

std::vector<std::string> PolicyNames() {
  return {"random", "dotprod", "clustering", "packing", "bestfit", "fgd", "tessera"};
}

absl::StatusOr<std::unique_ptr<Policy>> MakePolicy(const std::string& name,
                                                   const TargetWorkload& target) {
  if (name == "random") {
    return std::unique_ptr<Policy>(new RandomPolicy());
  }
  if (name == "bestfit") {
    return std::unique_ptr<Policy>(new BestFitPolicy());
  }
  if (name == "fgd") {
    return std::unique_ptr<Policy>(new FgdPolicy(target));
  }
  if (name == "tessera") {
    return MakeTesseraPolicy();
  }
  if (name == "dotprod") {
    return std::unique_ptr<Policy>(new DotProdPolicy());
  }
  if (name == "packing") {
    return std::unique_ptr<Policy>(new PackingPolicy());
  }
  if (name == "clustering") {
    return std::unique_ptr<Policy>(new ClusteringPolicy());
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown policy \"", name, "\" (expected one of: ", absl::StrJoin(PolicyNames(), ", "), ")"));
}

}  // namespace tessera::placement::gpushare
