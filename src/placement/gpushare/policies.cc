#include "placement/gpushare/policies.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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
    const NodeState& n = state.node(node);
    const double before = NodeFragmentation(state, n, target_);
    NodeState after = n;
    after.cpu_free -= pod.cpu_milli;
    after.memory_free -= pod.memory_mib;
    auto score_of = [&](const NodeState& s) {
      double delta = NodeFragmentation(state, s, target_) - before;
      return static_cast<int64_t>(100.0 / (1.0 + std::exp(delta / 1000.0)));
    };
    if (pod.sharing()) {
      Choice best{-1, {}};
      for (size_t j = 0; j < n.gpu_free.size(); ++j) {
        if (n.gpu_free[j] < pod.gpu_milli) {
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

 private:
  TargetWorkload target_;
};

}  // namespace

std::vector<std::string> PolicyNames() { return {"random", "bestfit", "fgd"}; }

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
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown policy \"", name, "\" (expected one of: ", absl::StrJoin(PolicyNames(), ", "), ")"));
}

}  // namespace tessera::placement::gpushare
