#include "placement/plan_validator.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "model/mig_geometry.h"

namespace tessera::placement {

std::vector<std::string> ValidatePlan(const model::Fleet& fleet, const model::WorkloadSet& set,
                                      const Plan& plan, const PlannerOptions& options) {
  std::vector<std::string> errors;
  auto fail = [&](auto&&... parts) { errors.push_back(absl::StrCat(parts...)); };
  const int num_workloads = static_cast<int>(set.workloads.size());
  if (plan.pools.size() != fleet.pools.size()) {
    fail("plan has ", plan.pools.size(), " pools, fleet ", fleet.pools.size());
    return errors;
  }
  if (static_cast<int>(plan.placements.size()) != num_workloads) {
    fail("plan has ", plan.placements.size(), " placements for ", num_workloads, " workloads");
    return errors;
  }
  // (workload, replica) -> list of (pool, node, gpu).
  std::map<std::pair<int, int>, std::vector<std::tuple<int, int, int>>> seen;
  std::vector<std::set<std::pair<int, int>>> nodes_of(num_workloads);
  int gpus_after = 0, nodes_after = 0;
  for (size_t p = 0; p < plan.pools.size(); ++p) {
    const model::Pool& pool = fleet.pools[p];
    const PoolPlan& pp = plan.pools[p];
    int used_nodes = 0, used_gpus = 0;
    for (size_t n = 0; n < pp.nodes.size(); ++n) {
      const NodePlan& node = pp.nodes[n];
      std::string where_node = absl::StrCat("pool ", pool.name, " node ", node.name);
      if (static_cast<int>(node.gpus.size()) != pool.gpus_per_node) {
        fail(where_node, ": has ", node.gpus.size(), " GPUs, pool has ", pool.gpus_per_node);
      }
      used_nodes += node.used_gpus() > 0 ? 1 : 0;
      for (const GpuPlan& gpu : node.gpus) {
        std::string where = absl::StrCat(where_node, " GPU ", gpu.index);
        if (gpu.tenants.empty()) {
          if (gpu.mode != GpuMode::kIdle) {
            fail(where, ": mode ", GpuModeName(gpu.mode), " without tenants");
          }
          continue;
        }
        ++used_gpus;
        // Node-wide sharing: MPS/time-slicing nodes hold only that mode; others none of it.
        GpuMode want_shared = node.sharing == NodeSharing::kMps           ? GpuMode::kMps
                              : node.sharing == NodeSharing::kTimeSlicing ? GpuMode::kTimeSlicing
                                                                          : GpuMode::kIdle;
        if (want_shared != GpuMode::kIdle && gpu.mode != want_shared) {
          fail(where, ": ", GpuModeName(gpu.mode), " on a node configured for ",
               GpuModeName(want_shared));
        }
        if (want_shared == GpuMode::kIdle &&
            (gpu.mode == GpuMode::kMps || gpu.mode == GpuMode::kTimeSlicing)) {
          fail(where, ": ", GpuModeName(gpu.mode), " on a node without that sharing config");
        }
        if (gpu.mode == GpuMode::kMig) {
          if (!pool.mig_allowed) {
            fail(where, ": MIG on a pool where MIG is not allowed");
          }
          if (absl::Status s = model::ValidateLayout(*pool.gpu, gpu.layout); !s.ok()) {
            fail(where, ": illegal MIG layout: ", s.message());
          }
        }
        if (gpu.mode == GpuMode::kExclusive && gpu.tenants.size() != 1) {
          fail(where, ": exclusive GPU with ", gpu.tenants.size(), " tenants");
        }
        if ((gpu.mode == GpuMode::kMps || gpu.mode == GpuMode::kTimeSlicing) &&
            static_cast<int>(gpu.tenants.size()) > node.slots) {
          fail(where, ": ", gpu.tenants.size(), " tenants in ", node.slots, " slots");
        }
        std::set<int> instances;
        for (const Tenant& t : gpu.tenants) {
          if (t.workload < 0 || t.workload >= num_workloads) {
            fail(where, ": tenant of unknown workload ", t.workload);
            continue;
          }
          const model::Workload& w = set.workloads[t.workload];
          const WorkloadPlacement& wp = plan.placements[t.workload];
          seen[{t.workload, t.replica}].push_back(
              {static_cast<int>(p), static_cast<int>(n), gpu.index});
          nodes_of[t.workload].insert({static_cast<int>(p), static_cast<int>(n)});
          if (wp.pool != static_cast<int>(p)) {
            fail(where, ": ", w.key(), " placed in pool ", wp.pool, " but runs here");
          }
          ShapeKind kind = wp.shape.kind;
          bool mode_ok = (kind == ShapeKind::kExclusive && gpu.mode == GpuMode::kExclusive) ||
                         (kind == ShapeKind::kMig && gpu.mode == GpuMode::kMig) ||
                         (kind == ShapeKind::kMps && gpu.mode == GpuMode::kMps) ||
                         (kind == ShapeKind::kTimeSlicing && gpu.mode == GpuMode::kTimeSlicing);
          if (!mode_ok) {
            fail(where, ": ", w.key(), " has shape ", ShapeKindName(kind), " on a ",
                 GpuModeName(gpu.mode), " GPU");
            continue;
          }
          std::string why;
          if (!ShapeFits(w, pool, wp.shape, options, &why)) {
            fail(where, ": ", w.key(), ": ", why);
          }
          if (kind == ShapeKind::kMig) {
            if (t.mig_instance < 0 || t.mig_instance >= static_cast<int>(gpu.layout.size()) ||
                !instances.insert(t.mig_instance).second) {
              fail(where, ": ", w.key(), " has no MIG instance of its own");
            } else if (gpu.layout[t.mig_instance].profile != wp.shape.profile) {
              fail(where, ": ", w.key(), " sits on a MIG instance of another profile");
            }
          }
          if ((kind == ShapeKind::kMps || kind == ShapeKind::kTimeSlicing) &&
              wp.shape.slots != node.slots) {
            fail(where, ": ", w.key(), " planned for ", wp.shape.slots, " slots, node has ",
                 node.slots);
          }
        }
      }
    }
    if (used_nodes > pool.max_nodes) {
      fail("pool ", pool.name, ": ", used_nodes, " nodes used, maxNodes ", pool.max_nodes);
    }
    if (used_gpus != pp.gpus_used || used_nodes != pp.nodes_used) {
      fail("pool ", pool.name, ": totals say ", pp.gpus_used, " GPUs / ", pp.nodes_used,
           " nodes, nodes hold ", used_gpus, " / ", used_nodes);
    }
    gpus_after += used_gpus;
    nodes_after += used_nodes;
  }
  // Every placed replica exactly once; every replica placed or reported.
  std::vector<int> unplaced(num_workloads, 0);
  for (const Unplaceable& u : plan.unplaceable) {
    if (u.workload >= 0 && u.workload < num_workloads) {
      unplaced[u.workload] += u.replicas;
    }
  }
  for (int w = 0; w < num_workloads; ++w) {
    const model::Workload& wl = set.workloads[w];
    const WorkloadPlacement& wp = plan.placements[w];
    if (wp.replicas_placed + unplaced[w] != wl.replicas) {
      fail(wl.key(), ": ", wp.replicas_placed, " placed + ", unplaced[w],
           " unplaceable != ", wl.replicas, " replicas");
    }
    int gpus_each = std::max(1, wl.whole_gpus());
    for (int r = 0; r < wp.replicas_placed; ++r) {
      auto it = seen.find({w, r});
      int count = it == seen.end() ? 0 : static_cast<int>(it->second.size());
      if (count != gpus_each) {
        fail(wl.key(), " replica ", r, ": on ", count, " GPUs, expected ", gpus_each);
      } else if (gpus_each > 1) {
        for (const auto& loc : it->second) {
          if (std::get<1>(loc) != std::get<1>(it->second[0])) {
            fail(wl.key(), " replica ", r, ": its ", gpus_each, " GPUs span nodes");
            break;
          }
        }
      }
    }
    for (const auto& [key, locs] : seen) {
      if (key.first == w && key.second >= wp.replicas_placed) {
        fail(wl.key(), " replica ", key.second, " runs but only ", wp.replicas_placed,
             " are placed");
      }
    }
    if (wp.replicas_placed >= 2 && wp.pool >= 0 && fleet.pools[wp.pool].max_nodes >= 2 &&
        options.spread_replicas && !plan.pools[wp.pool].spread_relaxed && nodes_of[w].size() < 2) {
      fail(wl.key(), ": ", wp.replicas_placed, " replicas all on one node");
    }
  }
  if (gpus_after != plan.totals.gpus_after || nodes_after != plan.totals.nodes_after) {
    fail("totals say ", plan.totals.gpus_after, " GPUs / ", plan.totals.nodes_after,
         " nodes; pools hold ", gpus_after, " / ", nodes_after);
  }
  return errors;
}

}  // namespace tessera::placement
