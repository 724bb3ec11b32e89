// The Plan: what `tessera plan` decided for every GPU of a fleet (mode, MIG layout, tenants),
// per node (device-plugin sharing config and MIG config) and per workload (the one resource
// its Deployment requests). Built by the Planner, checked by ValidatePlan, written out by the
// adapters (plan.json, mig-parted.yaml, device-plugin-config.yaml, manifests).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/fleet.h"
#include "model/mig_geometry.h"

namespace tessera::placement {

// How a replica uses GPUs. One shape per workload: a Deployment has one pod template, so all
// its replicas request the same resource.
enum class ShapeKind { kExclusive, kMig, kMps, kTimeSlicing };
const char* ShapeKindName(ShapeKind k);

struct Shape {
  ShapeKind kind = ShapeKind::kExclusive;
  int gpus = 1;      // kExclusive: whole GPUs per replica
  int profile = -1;  // kMig: profile index in the pool's GpuModel
  int slots = 0;     // kMps / kTimeSlicing: replicas per GPU configured on the node
  // GPUs one replica costs in this shape (1/slots, the MIG instance's share, or gpus); used to
  // compare shapes and pools.
  double gpu_fraction = 1.0;
  bool operator==(const Shape& o) const {
    return kind == o.kind && gpus == o.gpus && profile == o.profile && slots == o.slots;
  }
};

// Node-wide device-plugin configuration: MPS and time-slicing apply to every GPU of a node
// with one replica count (k8s-device-plugin strips per-device overrides).
enum class NodeSharing { kNone, kMps, kTimeSlicing };
const char* NodeSharingName(NodeSharing s);  // "none", "mps", "time-slicing"

struct Tenant {
  int workload = 0;       // index into the WorkloadSet
  int replica = 0;        // 0-based replica number within the workload
  int mig_instance = -1;  // index into GpuPlan::layout for MIG GPUs
};

enum class GpuMode { kIdle, kExclusive, kMig, kMps, kTimeSlicing };
const char* GpuModeName(GpuMode m);

struct GpuPlan {
  int index = 0;  // GPU index on the node (nvidia-smi order)
  GpuMode mode = GpuMode::kIdle;
  model::MigLayout layout;  // kMig: instances, ordered by start slot
  std::vector<Tenant> tenants;
};

struct NodePlan {
  std::string name;
  bool exists = false;  // an existing node (else one the pool must grow by)
  NodeSharing sharing = NodeSharing::kNone;
  int slots = 0;              // replicas per GPU for kMps / kTimeSlicing
  std::vector<GpuPlan> gpus;  // always gpus_per_node entries
  int used_gpus() const;
};

struct PoolPlan {
  int pool = 0;                     // index into Fleet::pools
  std::vector<NodePlan> nodes;      // nodes holding tenants first, then unused existing nodes
  int gpus_used = 0;                // GPUs with at least one tenant
  int nodes_used = 0;               // nodes with at least one tenant
  int lower_bound_gpus = 0;         // the stronger of the two bounds (placement/planner.h)
  int simple_lower_bound_gpus = 0;  // memory / compute / MIG-slice bound alone
  // True when spreading replicas over two nodes was given up in this pool (maxNodes too low,
  // or no room on a second node); Plan::warnings says which workloads.
  bool spread_relaxed = false;
};

// Where a workload went.
struct WorkloadPlacement {
  int workload = 0;
  int pool = -1;  // -1: nothing placed
  Shape shape;
  int replicas_placed = 0;
  std::string resource;  // e.g. "nvidia.com/mig-3g.40gb", "nvidia.com/gpu.shared"
  int resource_count = 1;
  // Labels the Deployment selects nodes by (the pool, and the sharing config when shared).
  std::vector<std::pair<std::string, std::string>> node_selector;
};

struct Unplaceable {
  int workload = 0;
  int replicas = 0;
  std::string reason;
};

struct PlanTotals {
  int gpus_before = 0;  // one whole GPU per replica (N for N-GPU replicas) of placed replicas
  int gpus_after = 0;
  int lower_bound_gpus = 0;
  int simple_lower_bound_gpus = 0;
  int nodes_after = 0;
  double cost_per_month_before = 0;
  double cost_per_month_after = 0;
};

struct Plan {
  std::vector<PoolPlan> pools;                // one per fleet pool, same order
  std::vector<WorkloadPlacement> placements;  // one per workload, same order
  std::vector<Unplaceable> unplaceable;
  std::vector<std::string> warnings;
  PlanTotals totals;
};

// Hours in a month for monthly cost figures (365 x 24 / 12).
inline constexpr double kHoursPerMonth = 730.0;

}  // namespace tessera::placement
