#include "adapters/k8s/plan_json.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/units.h"
#include "nlohmann/json.hpp"

namespace tessera::adapters {
namespace {

using nlohmann::json;
using placement::GpuMode;
using placement::NodeSharing;
using placement::ShapeKind;

double Round2(double x) { return std::round(x * 100.0) / 100.0; }

std::string ShapeText(const model::Pool& pool, const placement::Shape& s) {
  switch (s.kind) {
    case ShapeKind::kExclusive:
      return s.gpus == 1 ? "whole GPU" : absl::StrCat(s.gpus, " whole GPUs");
    case ShapeKind::kMig:
      return absl::StrCat("MIG ", pool.gpu->profiles[s.profile].name);
    case ShapeKind::kMps:
      return absl::StrCat("MPS 1/", s.slots);
    case ShapeKind::kTimeSlicing:
      return absl::StrCat("time-slice 1/", s.slots);
  }
  return "?";
}

}  // namespace

std::string PlanJson(const model::Fleet& fleet, const model::WorkloadSet& set,
                     const placement::Plan& plan, const NodeConfigs& configs,
                     const placement::PlannerOptions& options) {
  json j;
  j["apiVersion"] = "tessera.io/v1alpha1";
  j["kind"] = "Plan";
  j["options"] = {{"time_slicing_oversubscription", options.time_slicing_oversubscription},
                  {"max_slots", options.max_slots}};
  const placement::PlanTotals& t = plan.totals;
  j["totals"] = {{"gpus_before", t.gpus_before},
                 {"gpus_after", t.gpus_after},
                 {"lower_bound_gpus", t.lower_bound_gpus},
                 {"simple_lower_bound_gpus", t.simple_lower_bound_gpus},
                 {"nodes_after", t.nodes_after},
                 {"cost_per_month_before", Round2(t.cost_per_month_before)},
                 {"cost_per_month_after", Round2(t.cost_per_month_after)},
                 {"savings_per_month", Round2(t.cost_per_month_before - t.cost_per_month_after)}};
  j["pools"] = json::array();
  for (size_t p = 0; p < plan.pools.size(); ++p) {
    const model::Pool& pool = fleet.pools[p];
    const placement::PoolPlan& pp = plan.pools[p];
    json jp = {{"name", pool.name},
               {"gpu_model", pool.gpu->name},
               {"gpu_memory_bytes", pool.gpu_memory_bytes},
               {"gpus_per_node", pool.gpus_per_node},
               {"nodes_existing", pool.nodes},
               {"max_nodes", pool.max_nodes},
               {"cost_per_gpu_hour", pool.cost_per_gpu_hour},
               {"gpus_used", pp.gpus_used},
               {"nodes_used", pp.nodes_used},
               {"lower_bound_gpus", pp.lower_bound_gpus},
               {"simple_lower_bound_gpus", pp.simple_lower_bound_gpus},
               {"spread_relaxed", pp.spread_relaxed},
               {"nodes", json::array()}};
    for (size_t n = 0; n < pp.nodes.size(); ++n) {
      const placement::NodePlan& node = pp.nodes[n];
      json jn = {{"name", node.name},
                 {"exists", node.exists},
                 {"used", node.used_gpus() > 0},
                 {"sharing", placement::NodeSharingName(node.sharing)},
                 {"replicas_per_gpu", node.slots},
                 {"mig_config", configs.nodes[p][n].mig_config},
                 {"device_plugin_config", configs.nodes[p][n].device_plugin_config},
                 {"gpus", json::array()}};
      for (const placement::GpuPlan& g : node.gpus) {
        json jg = {{"index", g.index}, {"mode", placement::GpuModeName(g.mode)}};
        if (g.mode == GpuMode::kMig) {
          jg["mig_layout"] = json::array();
          for (const model::MigInstance& inst : g.layout) {
            jg["mig_layout"].push_back(
                {{"profile", pool.gpu->profiles[inst.profile].name}, {"start", inst.start}});
          }
        }
        jg["tenants"] = json::array();
        for (const placement::Tenant& tn : g.tenants) {
          const placement::WorkloadPlacement& wp = plan.placements[tn.workload];
          json jt = {{"workload", set.workloads[tn.workload].key()},
                     {"replica", tn.replica},
                     {"resource", wp.resource}};
          if (tn.mig_instance >= 0) {
            jt["mig_instance"] = tn.mig_instance;
          }
          jg["tenants"].push_back(jt);
        }
        jn["gpus"].push_back(jg);
      }
      jp["nodes"].push_back(jn);
    }
    j["pools"].push_back(jp);
  }
  j["workloads"] = json::array();
  for (const placement::WorkloadPlacement& wp : plan.placements) {
    const model::Workload& w = set.workloads[wp.workload];
    json jw = {{"name", w.name},
               {"namespace", w.ns},
               {"replicas", w.replicas},
               {"replicas_placed", wp.replicas_placed},
               {"gpu_memory_bytes", w.memory_bytes},
               {"gpu_compute", w.compute_milli / 1000.0},
               {"isolation", model::IsolationName(w.isolation)}};
    if (wp.pool >= 0) {
      jw["pool"] = fleet.pools[wp.pool].name;
      jw["mode"] = placement::ShapeKindName(wp.shape.kind);
      if (wp.shape.kind == ShapeKind::kMig) {
        jw["mig_profile"] = fleet.pools[wp.pool].gpu->profiles[wp.shape.profile].name;
      }
      if (wp.shape.kind == ShapeKind::kMps || wp.shape.kind == ShapeKind::kTimeSlicing) {
        jw["replicas_per_gpu"] = wp.shape.slots;
      }
      if (wp.shape.kind == ShapeKind::kExclusive) {
        jw["gpus_per_replica"] = wp.shape.gpus;
      }
      jw["resource"] = wp.resource;
      jw["resource_count"] = wp.resource_count;
      json sel = json::object();
      for (const auto& [k, v] : wp.node_selector) {
        sel[k] = v;
      }
      jw["node_selector"] = sel;
    }
    j["workloads"].push_back(jw);
  }
  j["unplaceable"] = json::array();
  for (const placement::Unplaceable& u : plan.unplaceable) {
    j["unplaceable"].push_back({{"workload", set.workloads[u.workload].key()},
                                {"replicas", u.replicas},
                                {"reason", u.reason}});
  }
  j["warnings"] = plan.warnings;
  return j.dump(2) + "\n";
}

std::string PlanReport(const model::Fleet& fleet, const model::WorkloadSet& set,
                       const placement::Plan& plan) {
  std::string out;
  int replicas = 0;
  for (const model::Workload& w : set.workloads) {
    replicas += w.replicas;
  }
  absl::StrAppendFormat(&out, "Tessera plan: %d pool(s), %d workload(s), %d replica(s)\n",
                        fleet.pools.size(), set.workloads.size(), replicas);
  for (size_t p = 0; p < plan.pools.size(); ++p) {
    const model::Pool& pool = fleet.pools[p];
    const placement::PoolPlan& pp = plan.pools[p];
    absl::StrAppendFormat(
        &out, "\nPool %s: %s, %d GPUs/node, $%.2f/GPU-hour, %d node(s) now, up to %d\n", pool.name,
        pool.gpu->name, pool.gpus_per_node, pool.cost_per_gpu_hour, pool.nodes, pool.max_nodes);
    absl::StrAppendFormat(&out, "  %-38s %-8s %-14s %s\n", "workload", "replicas", "shape",
                          "resource");
    int before = 0;
    for (const placement::WorkloadPlacement& wp : plan.placements) {
      if (wp.pool != static_cast<int>(p)) {
        continue;
      }
      const model::Workload& w = set.workloads[wp.workload];
      before += wp.replicas_placed * std::max(1, w.whole_gpus());
      absl::StrAppendFormat(&out, "  %-38s %-8d %-14s %s x%d\n", w.key(), wp.replicas_placed,
                            ShapeText(pool, wp.shape), wp.resource, wp.resource_count);
    }
    absl::StrAppendFormat(&out, "  %-14s %-13s %-9s %s\n", "node", "sharing", "GPUs used", "GPUs");
    for (const placement::NodePlan& node : pp.nodes) {
      std::vector<std::string> gpus;
      for (const placement::GpuPlan& g : node.gpus) {
        if (g.tenants.empty()) {
          continue;
        }
        std::string desc;
        if (g.mode == GpuMode::kMig) {
          desc = absl::StrCat("[", model::FormatLayout(*pool.gpu, g.layout), "]");
        } else if (g.mode == GpuMode::kExclusive) {
          desc = "[whole]";
        } else {
          desc = absl::StrCat("[", g.tenants.size(), "/", node.slots, "]");
        }
        gpus.push_back(std::move(desc));
      }
      // Runs of equal GPUs as "7x[whole]".
      std::vector<std::string> runs;
      for (size_t i = 0; i < gpus.size();) {
        size_t j = i;
        while (j < gpus.size() && gpus[j] == gpus[i]) {
          ++j;
        }
        runs.push_back(j - i > 1 ? absl::StrCat(j - i, "x", gpus[i]) : gpus[i]);
        i = j;
      }
      gpus = std::move(runs);
      std::string sharing =
          node.sharing == NodeSharing::kNone
              ? "none"
              : absl::StrCat(placement::NodeSharingName(node.sharing), "/", node.slots);
      absl::StrAppendFormat(&out, "  %-14s %-13s %d/%-7d %s%s\n", node.name, sharing,
                            node.used_gpus(), node.gpus.size(),
                            node.used_gpus() == 0 ? "(free: can be removed)" : "",
                            absl::StrJoin(gpus, " "));
    }
    double gap = pp.lower_bound_gpus > 0
                     ? 100.0 * (pp.gpus_used - pp.lower_bound_gpus) / pp.lower_bound_gpus
                     : 0.0;
    absl::StrAppendFormat(&out, "  GPUs: %d before -> %d after (lower bound %d, %+.1f%%)\n", before,
                          pp.gpus_used, pp.lower_bound_gpus, gap);
  }
  const placement::PlanTotals& t = plan.totals;
  double gap = t.lower_bound_gpus > 0
                   ? 100.0 * (t.gpus_after - t.lower_bound_gpus) / t.lower_bound_gpus
                   : 0.0;
  double saved = t.cost_per_month_before - t.cost_per_month_after;
  absl::StrAppendFormat(&out,
                        "\nTotal: %d GPUs before (one per replica) -> %d after on %d node(s); "
                        "lower bound %d (%.1f%% above)\n",
                        t.gpus_before, t.gpus_after, t.nodes_after, t.lower_bound_gpus, gap);
  absl::StrAppendFormat(
      &out, "Cost per month: $%.0f -> $%.0f (saves $%.0f, %.0f%%)\n", t.cost_per_month_before,
      t.cost_per_month_after, saved,
      t.cost_per_month_before > 0 ? 100.0 * saved / t.cost_per_month_before : 0.0);
  if (!plan.unplaceable.empty()) {
    absl::StrAppend(&out, "\nUnplaceable:\n");
    for (const placement::Unplaceable& u : plan.unplaceable) {
      absl::StrAppendFormat(&out, "  %s: %d replica(s): %s\n", set.workloads[u.workload].key(),
                            u.replicas, u.reason);
    }
  }
  if (!plan.warnings.empty()) {
    absl::StrAppend(&out, "\nWarnings:\n");
    for (const std::string& w : plan.warnings) {
      absl::StrAppend(&out, "  ", w, "\n");
    }
  }
  return out;
}

}  // namespace tessera::adapters
