// PoolBuilder: the planner's per-pool engine. Evaluate() costs a set of workloads with chosen
// shapes in GPUs and nodes from counts alone (what the planner's search calls thousands of
// times); Build() lays out the real nodes, GPUs, MIG layouts and tenants, spreading each
// workload's replicas over at least two nodes where the pool allows.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "model/fleet.h"
#include "placement/mig_packer.h"
#include "placement/plan.h"
#include "placement/shapes.h"

namespace tessera::placement {

// A workload's replicas in one pool, in one shape.
struct Member {
  int workload = 0;
  int replicas = 0;
  Shape shape;
};

struct Estimate {
  int gpus = 0;
  int nodes = 0;
  bool operator<(const Estimate& o) const {
    return gpus != o.gpus ? gpus < o.gpus : nodes < o.nodes;
  }
};

// Names of the node-wide device-plugin configs ("tessera-mps-4", "tessera-ts-3").
std::string SharingConfigName(NodeSharing sharing, int slots);
// Label every planned node of a pool carries, which Deployments select.
inline constexpr char kPoolLabel[] = "tessera.io/pool";
inline constexpr char kDevicePluginConfigLabel[] = "nvidia.com/device-plugin.config";
inline constexpr char kMigConfigLabel[] = "nvidia.com/mig.config";

// Fills the resource name, count and node selector of a placement in `shape` on `pool`.
void DescribeResource(const model::Pool& pool, const Shape& shape, WorkloadPlacement* out);

class PoolBuilder {
 public:
  PoolBuilder(const model::Pool& pool, const model::WorkloadSet& workloads)
      : pool_(pool), workloads_(workloads), packer_(*pool.gpu) {}

  // GPUs and nodes `members` need; `spread` adds what spreading replicas over two nodes costs.
  Estimate Evaluate(const std::vector<Member>& members, bool spread);

  // Nodes (used ones first, then the pool's unused existing nodes), tenants and totals.
  PoolPlan Build(const std::vector<Member>& members, bool spread,
                 std::vector<std::string>* warnings);

 private:
  struct Groups;
  Groups Group(const std::vector<Member>& members, bool spread);
  // Moves replicas until each workload with two or more spans two nodes; returns the keys of
  // workloads it could not spread.
  std::vector<std::string> SpreadFix(PoolPlan& plan, const std::vector<Member>& members);

  const model::Pool& pool_;
  const model::WorkloadSet& workloads_;
  MigPacker packer_;
};

}  // namespace tessera::placement
