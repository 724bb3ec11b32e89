#include "placement/gpushare/tessera_policy.h"

#include <algorithm>

namespace tessera::placement::gpushare {
namespace {

class TesseraPolicy final : public Policy {
 public:
  explicit TesseraPolicy(double relearn_growth) : relearn_growth_(relearn_growth) {}
  std::string name() const override { return "tessera"; }

  void Observe(const PodSpec& pod) override {
    seen_.Add(pod);
    if (static_cast<double>(seen_.total()) >= next_update_) {
      // Every task class seen so far, weighted by how often it arrived: no cut-off, so rare
      // but large classes (multi-GPU pods) also count when a placement would strand them.
      target_ = seen_.Build(/*coverage=*/1.0);
      // Relearn after geometrically more arrivals (cheap early, stable later), but at least
      // every kMaxRelearnInterval pods, so a long-running scheduler keeps counting new arrivals.
      next_update_ = std::min(std::max(next_update_ * relearn_growth_, next_update_ + 8),
                              next_update_ + kMaxRelearnInterval);
      ++epoch_;
    }
  }
  uint64_t epoch() const override { return epoch_; }

  // FGD's score: its coarseness makes near-equal placements tie, and ties go to the first node
  // in order, which packs (measured: exact deltas with best-fit tie-breaks allocate less;
  // docs/scheduler.md).
  //
  // A CPU-only pod, among nodes of equal score, goes to the one with the least free GPU: the CPU
  // it takes is CPU that GPU pods can no longer use on that node, so it is cheapest where no GPU
  // is left to strand (a node whose GPUs are all allocated, or a CPU-only node). FGD's score
  // sees only the classes the CPU taken would stop fitting, and ties everywhere else.
  Choice Score(const ClusterState& state, int node, const PodSpec& pod) const override {
    Choice c = FgdChoice(state, node, pod, target_);
    if (pod.num_gpu == 0) c.tie = -state.node(node).gpu_free_total();
    return c;
  }

 private:
  double relearn_growth_;
  static constexpr double kMaxRelearnInterval = 20000;
  TaskClassCounts seen_;
  TargetWorkload target_;
  double next_update_ = 1;
  uint64_t epoch_ = 0;
};

}  // namespace

std::unique_ptr<Policy> MakeTesseraPolicy() { return std::make_unique<TesseraPolicy>(1.5); }

}  // namespace tessera::placement::gpushare
