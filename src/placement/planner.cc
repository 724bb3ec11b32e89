#include "placement/planner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "placement/mig_packer.h"
#include "placement/pool_builder.h"

namespace tessera::placement {
namespace {

using model::Isolation;

double Footprint(const Member& m) { return m.replicas * m.shape.gpu_fraction; }

// The first pool-local shape list: shapes per (workload, pool).
struct Choices {
  std::vector<std::vector<ShapeChoice>> by_workload;  // [workload][pool]
};

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Pools with at most this many replicas are scored by building the real layout (which sees
// what spreading and MIG placement cost); bigger ones by counts alone.
constexpr int kBuildScoreReplicas = 150;
// Shape combinations tried exhaustively when there are at most this many.
constexpr long kExhaustiveCombinations = 1024;

Estimate Score(PoolBuilder& builder, const std::vector<Member>& ms, bool spread) {
  int replicas = 0;
  for (const Member& m : ms) {
    replicas += m.replicas;
  }
  if (replicas <= kBuildScoreReplicas) {
    std::vector<std::string> ignored;
    PoolPlan built = builder.Build(ms, spread, &ignored);
    return {built.gpus_used, built.nodes_used};
  }
  return builder.Evaluate(ms, spread);
}

// Each member's shapes, plus the MPS/time-slicing slot counts other members reach at most
// (joining another class at a lower density can beat a sparse class of one's own).
std::vector<std::vector<Shape>> ShapeLists(const std::vector<std::vector<Shape>>& own) {
  std::vector<std::vector<Shape>> out = own;
  for (size_t i = 0; i < own.size(); ++i) {
    for (const Shape& mine : own[i]) {
      if (mine.kind != ShapeKind::kMps && mine.kind != ShapeKind::kTimeSlicing) {
        continue;
      }
      for (size_t j = 0; j < own.size(); ++j) {
        for (const Shape& theirs : own[j]) {
          if (theirs.kind == mine.kind && theirs.slots < mine.slots &&
              std::find(out[i].begin(), out[i].end(), theirs) == out[i].end()) {
            out[i].push_back(theirs);
          }
        }
      }
    }
  }
  return out;
}

// Chooses each member's shape to lower (GPUs, nodes): every combination when there are few,
// otherwise local search (one member at a time, then whole slot classes merged into a denser
// class's nodes) for `options.improvement_passes` passes. Members start in their first shape.
void ImproveShapes(PoolBuilder& builder, const PlannerOptions& options,
                   const std::vector<std::vector<Shape>>& own, std::vector<Member>& ms) {
  if (ms.empty() || options.improvement_passes <= 0) {
    return;
  }
  std::vector<std::vector<Shape>> lists = ShapeLists(own);
  long combinations = 1;
  for (const auto& l : lists) {
    combinations =
        std::min(combinations * static_cast<long>(l.size()), kExhaustiveCombinations + 1);
  }
  Estimate best = Score(builder, ms, options.spread_replicas);
  if (combinations <= kExhaustiveCombinations) {
    std::vector<Shape> best_shapes;
    best_shapes.reserve(ms.size());
    for (const Member& m : ms) {
      best_shapes.push_back(m.shape);
    }
    std::vector<size_t> index(ms.size(), 0);
    while (true) {
      size_t k = 0;
      while (k < index.size() && ++index[k] == lists[k].size()) {
        index[k++] = 0;
      }
      if (k == index.size()) {
        break;
      }
      for (size_t i = 0; i < ms.size(); ++i) {
        ms[i].shape = lists[i][index[i]];
      }
      Estimate e = Score(builder, ms, options.spread_replicas);
      if (e < best) {
        best = e;
        for (size_t i = 0; i < ms.size(); ++i) {
          best_shapes[i] = ms[i].shape;
        }
      }
    }
    for (size_t i = 0; i < ms.size(); ++i) {
      ms[i].shape = best_shapes[i];
    }
    return;
  }
  for (int pass = 0; pass < options.improvement_passes; ++pass) {
    bool improved = false;
    for (size_t i = 0; i < ms.size(); ++i) {
      Shape original = ms[i].shape;
      Shape best_shape = original;
      for (const Shape& s : lists[i]) {
        if (s == original) {
          continue;
        }
        ms[i].shape = s;
        Estimate e = Score(builder, ms, options.spread_replicas);
        if (e < best) {
          best = e;
          best_shape = s;
        }
      }
      ms[i].shape = best_shape;
      improved |= !(best_shape == original);
    }
    // Merge a slot class into a denser-packed class of the same kind with fewer slots.
    std::vector<Shape> classes;
    for (const Member& m : ms) {
      if ((m.shape.kind == ShapeKind::kMps || m.shape.kind == ShapeKind::kTimeSlicing) &&
          std::find(classes.begin(), classes.end(), m.shape) == classes.end()) {
        classes.push_back(m.shape);
      }
    }
    for (const Shape& from : classes) {
      for (const Shape& to : classes) {
        if (from.kind != to.kind || to.slots >= from.slots) {
          continue;
        }
        std::vector<Member> trial = ms;
        for (Member& m : trial) {
          if (m.shape == from) {
            m.shape = to;
          }
        }
        Estimate e = Score(builder, trial, options.spread_replicas);
        if (e < best) {
          best = e;
          ms = std::move(trial);
          improved = true;
        }
      }
    }
    if (!improved) {
      break;
    }
  }
}

}  // namespace

LowerBounds PoolLowerBounds(const model::Pool& pool, const model::WorkloadSet& workloads,
                            const std::vector<std::pair<int, int>>& workload_replicas,
                            const PlannerOptions& options) {
  int64_t whole = 0;
  long double memory = 0;
  long double compute = 0;
  long double least_share = 0;
  // Counting bound (see LowerBounds::shape_aware): for k = 1..7, the replicas every shape of
  // which is "k-limited", and the most k-limited MIG instances one GPU can hold.
  constexpr int kMaxK = 7;
  int64_t limited[kMaxK + 1] = {};
  int per_gpu[kMaxK + 1] = {};
  const model::GpuModel& gm = *pool.gpu;
  auto profile_limited = [&](const model::MigProfile& p, int k) {
    return p.compute_slices * (k + 1) > gm.mig_compute_slices ||
           p.memory_slices * (k + 1) > gm.mig_memory_slices;
  };
  if (pool.mig_allowed && gm.mig_capable()) {
    std::vector<model::MigLayout> layouts = model::EnumerateMaximalLayouts(gm);
    for (int k = 1; k <= kMaxK; ++k) {
      for (const model::MigLayout& l : layouts) {
        int n = 0;
        for (const model::MigInstance& inst : l) {
          n += profile_limited(gm.profiles[inst.profile], k) ? 1 : 0;
        }
        per_gpu[k] = std::max(per_gpu[k], n);
      }
    }
  }
  int64_t mig_memory_slices = 0;
  int64_t mig_compute_slices = 0;
  const model::GpuModel& m = *pool.gpu;
  for (const auto& [wi, replicas] : workload_replicas) {
    const model::Workload& w = workloads.workloads[wi];
    if (w.whole_gpus() > 0) {
      whole += static_cast<int64_t>(w.whole_gpus()) * replicas;
      least_share += static_cast<long double>(w.whole_gpus()) * replicas;
      for (int k = 1; k <= kMaxK; ++k) {
        limited[k] += static_cast<int64_t>(w.whole_gpus()) * replicas;
      }
      continue;
    }
    // The least share of a GPU one replica can take in any shape: exclusive 1; MIG
    // min(memory/8, SM/7) of any fitting profile (those add up to at most 1 per GPU); MPS or
    // time-slicing 1/slots at the most slots it fits. Summed over a GPU's tenants it is at most
    // 1, so the sum over replicas is a lower bound on GPUs.
    long double share = 1.0L;
    // The smallest k for which every shape of this replica is k-limited (kMaxK + 1: none).
    int min_k = 1;
    if (pool.mig_allowed) {
      for (const model::MigProfile& p : m.profiles) {
        if (p.memory_bytes >= w.memory_bytes &&
            int64_t{p.compute_slices} * 1000 >= w.compute_milli * m.mig_compute_slices) {
          while (min_k <= kMaxK && !profile_limited(p, min_k)) {
            ++min_k;
          }
          share = std::min(share,
                           std::min<long double>(
                               static_cast<long double>(p.memory_slices) / m.mig_memory_slices,
                               static_cast<long double>(p.compute_slices) / m.mig_compute_slices));
        }
      }
    }
    if (w.isolation != Isolation::kFull && options.allow_mps) {
      int k =
          MaxSlots(pool.gpu_memory_bytes, w.memory_bytes, w.compute_milli, 1.0, options.max_slots);
      if (k >= 2) {
        share = std::min(share, 1.0L / k);
        min_k = std::max(min_k, k);
      }
    }
    if (w.isolation == Isolation::kNone && options.allow_time_slicing) {
      int k = MaxSlots(pool.gpu_memory_bytes, w.memory_bytes, w.compute_milli,
                       options.time_slicing_oversubscription, options.max_slots);
      if (k >= 2) {
        share = std::min(share, 1.0L / k);
        min_k = std::max(min_k, k);
      }
    }
    least_share += share * replicas;
    for (int k = min_k; k <= kMaxK; ++k) {
      limited[k] += replicas;
    }
    bool mig_only = w.isolation == Isolation::kFull;
    int profile = mig_only ? SmallestMigProfile(pool, w.memory_bytes, w.compute_milli) : -1;
    if (mig_only && profile < 0) {
      whole += replicas;  // full isolation and no fitting profile: a whole GPU each
      continue;
    }
    memory += static_cast<long double>(w.memory_bytes) * replicas;
    double cap = (w.isolation == Isolation::kNone && options.allow_time_slicing)
                     ? std::max(1.0, options.time_slicing_oversubscription)
                     : 1.0;
    compute += static_cast<long double>(w.compute_milli) * replicas / (1000.0 * cap);
    if (mig_only) {
      mig_memory_slices += static_cast<int64_t>(m.profiles[profile].memory_slices) * replicas;
      mig_compute_slices += static_cast<int64_t>(m.profiles[profile].compute_slices) * replicas;
    }
  }
  auto ceil_ld = [](long double x) { return static_cast<int64_t>(std::ceil(x - 1e-9L)); };
  int64_t shared = std::max(ceil_ld(memory / pool.gpu_memory_bytes), ceil_ld(compute));
  if (pool.mig_allowed) {
    shared = std::max({shared, CeilDiv(mig_memory_slices, m.mig_memory_slices),
                       CeilDiv(mig_compute_slices, m.mig_compute_slices)});
  }
  LowerBounds out;
  out.simple = static_cast<int>(whole + shared);
  int64_t counting = 0;
  for (int k = 1; k <= kMaxK; ++k) {
    counting = std::max(counting, CeilDiv(limited[k], std::max(k, per_gpu[k])));
  }
  out.shape_aware = static_cast<int>(std::max(ceil_ld(least_share), counting));
  return out;
}

Plan MakePlan(const model::Fleet& fleet, const model::WorkloadSet& set,
              const PlannerOptions& options) {
  const int num_pools = static_cast<int>(fleet.pools.size());
  const int num_workloads = static_cast<int>(set.workloads.size());
  Plan plan;
  plan.placements.resize(num_workloads);
  plan.pools.resize(num_pools);
  for (int w = 0; w < num_workloads; ++w) {
    plan.placements[w].workload = w;
  }

  // 1. Shapes of every workload on every pool; workloads that fit nowhere are unplaceable.
  Choices choices;
  choices.by_workload.resize(num_workloads);
  std::vector<int> placeable;
  for (int w = 0; w < num_workloads; ++w) {
    const model::Workload& wl = set.workloads[w];
    std::vector<std::string> reasons;
    bool any = false;
    for (int p = 0; p < num_pools; ++p) {
      choices.by_workload[w].push_back(CandidateShapes(wl, fleet.pools[p], options));
      if (choices.by_workload[w].back().shapes.empty()) {
        reasons.push_back(
            absl::StrCat("pool ", fleet.pools[p].name, ": ", choices.by_workload[w].back().reason));
      } else {
        any = true;
      }
    }
    if (wl.replicas <= 0) {
      continue;
    }
    if (!any) {
      plan.unplaceable.push_back(
          {w, wl.replicas,
           num_pools == 0 ? std::string("the fleet has no pools") : absl::StrJoin(reasons, "; ")});
      continue;
    }
    placeable.push_back(w);
  }

  // 2. Pool per workload: the lowest estimated cost per replica (price x GPUs per replica in
  //    the workload's best shape there) among pools with estimated room; biggest first.
  auto best_fraction = [&](int w, int p) {
    return choices.by_workload[w][p].shapes[0].gpu_fraction;
  };
  std::vector<double> footprint(num_workloads, 0);
  for (int w : placeable) {
    double best = 1e300;
    for (int p = 0; p < num_pools; ++p) {
      if (!choices.by_workload[w][p].shapes.empty()) {
        best = std::min(best, best_fraction(w, p));
      }
    }
    footprint[w] = best * set.workloads[w].replicas;
  }
  std::vector<int> order = placeable;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return footprint[a] > footprint[b]; });
  std::vector<double> estimated(num_pools, 0);
  std::vector<std::vector<Member>> members(num_pools);
  for (int w : order) {
    const model::Workload& wl = set.workloads[w];
    int chosen = -1, fallback = -1;
    double chosen_cost = 0, fallback_cost = 0;
    for (int p = 0; p < num_pools; ++p) {
      if (choices.by_workload[w][p].shapes.empty()) {
        continue;
      }
      const model::Pool& pool = fleet.pools[p];
      double need = best_fraction(w, p) * wl.replicas;
      double cost = need * pool.cost_per_gpu_hour;
      double capacity = static_cast<double>(pool.max_nodes) * pool.gpus_per_node;
      if (estimated[p] + need <= capacity && (chosen < 0 || cost < chosen_cost)) {
        chosen = p;
        chosen_cost = cost;
      }
      if (fallback < 0 || cost < fallback_cost) {
        fallback = p;
        fallback_cost = cost;
      }
    }
    if (chosen < 0) {
      chosen = fallback;
    }
    estimated[chosen] += best_fraction(w, chosen) * wl.replicas;
    members[chosen].push_back({w, wl.replicas, choices.by_workload[w][chosen].shapes[0]});
  }

  std::vector<std::unique_ptr<PoolBuilder>> builders;
  builders.reserve(num_pools);
  for (int p = 0; p < num_pools; ++p) {
    builders.push_back(std::make_unique<PoolBuilder>(fleet.pools[p], set));
  }

  // 3. Shape search per pool (see ImproveShapes).
  for (int p = 0; p < num_pools; ++p) {
    std::vector<std::vector<Shape>> lists;
    for (const Member& m : members[p]) {
      lists.push_back(choices.by_workload[m.workload][p].shapes);
    }
    ImproveShapes(*builders[p], options, lists, members[p]);
  }

  // 4. Capacity: a pool that needs more nodes than maxNodes first drops spreading, then hands
  //    its biggest workloads to other pools with room, then places what fits.
  std::vector<bool> spread(num_pools, options.spread_replicas);
  for (int p = 0; p < num_pools; ++p) {
    const model::Pool& pool = fleet.pools[p];
    std::vector<Member>& ms = members[p];
    while (!ms.empty() && builders[p]->Evaluate(ms, spread[p]).nodes > pool.max_nodes) {
      if (spread[p] && builders[p]->Evaluate(ms, false).nodes <= pool.max_nodes) {
        spread[p] = false;
        break;
      }
      auto biggest = std::max_element(ms.begin(), ms.end(), [](const Member& a, const Member& b) {
        return Footprint(a) < Footprint(b);
      });
      Member m = *biggest;
      ms.erase(biggest);
      bool moved = false;
      for (int q = 0; q < num_pools && !moved; ++q) {
        if (q == p || choices.by_workload[m.workload][q].shapes.empty()) {
          continue;
        }
        std::vector<Member> trial = members[q];
        trial.push_back({m.workload, m.replicas, choices.by_workload[m.workload][q].shapes[0]});
        if (builders[q]->Evaluate(trial, spread[q]).nodes <= fleet.pools[q].max_nodes) {
          members[q] = std::move(trial);
          moved = true;
        }
      }
      if (moved) {
        continue;
      }
      // Place as many replicas here as fit (binary search), report the rest.
      int lo = 0, hi = m.replicas - 1;
      while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        std::vector<Member> trial = ms;
        trial.push_back({m.workload, mid, m.shape});
        if (builders[p]->Evaluate(trial, spread[p]).nodes <= pool.max_nodes) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      int fit = lo;
      if (fit > 0) {
        std::vector<Member> trial = ms;
        trial.push_back({m.workload, fit, m.shape});
        if (builders[p]->Evaluate(trial, spread[p]).nodes <= pool.max_nodes) {
          ms = std::move(trial);
        } else {
          fit = 0;
        }
      }
      plan.unplaceable.push_back(
          {m.workload, m.replicas - fit,
           absl::StrCat("capacity: pool ", pool.name, " is full at maxNodes ", pool.max_nodes, " (",
                        pool.max_nodes * pool.gpus_per_node,
                        " GPUs) and no other allowed "
                        "pool has room; raise maxNodes or add a pool")});
      if (fit > 0) {
        break;  // the pool now fits exactly
      }
    }
  }

  // 5. Build every pool's nodes and tenants.
  for (int p = 0; p < num_pools; ++p) {
    const model::Pool& pool = fleet.pools[p];
    PoolPlan& pp = plan.pools[p];
    // Step 4 sized the pool with Evaluate; the built layout can still need a node more (the
    // spreading pass, MIG packing). Shed replicas of the biggest workload until it fits, and
    // report them (found by fuzzing: a plan with 9 nodes in a pool of maxNodes 8).
    std::map<int, int> shed;
    for (;;) {
      std::vector<std::string> warnings;
      pp = builders[p]->Build(members[p], spread[p], &warnings);
      if (pp.nodes_used <= pool.max_nodes || members[p].empty()) {
        plan.warnings.insert(plan.warnings.end(), warnings.begin(), warnings.end());
        break;
      }
      auto biggest = std::max_element(
          members[p].begin(), members[p].end(),
          [](const Member& a, const Member& b) { return Footprint(a) < Footprint(b); });
      ++shed[biggest->workload];
      if (--biggest->replicas == 0) {
        members[p].erase(biggest);
      }
    }
    // Shedding can leave a workload whose replicas the layout kept on one node; say so, as
    // Build does when it cannot spread (fuzz-found).
    if (spread[p] && pool.max_nodes >= 2) {
      std::map<int, std::set<int>> nodes_of;
      for (size_t n = 0; n < pp.nodes.size(); ++n) {
        for (const GpuPlan& g : pp.nodes[n].gpus) {
          for (const Tenant& t : g.tenants) {
            nodes_of[t.workload].insert(static_cast<int>(n));
          }
        }
      }
      for (const Member& m : members[p]) {
        if (m.replicas >= 2 && nodes_of[m.workload].size() < 2) {
          pp.spread_relaxed = true;
          plan.warnings.push_back(absl::StrCat("pool ", pool.name, ": could not spread ",
                                               set.workloads[m.workload].key(),
                                               " over two nodes (no room on another node)"));
        }
      }
    }
    for (const auto& [w, n] : shed) {
      auto same = std::find_if(plan.unplaceable.begin(), plan.unplaceable.end(),
                               [w = w](const Unplaceable& u) { return u.workload == w; });
      if (same != plan.unplaceable.end()) {
        same->replicas += n;  // already reported for this pool's capacity
        continue;
      }
      plan.unplaceable.push_back(
          {w, n,
           absl::StrCat("capacity: pool ", pool.name, " is full at maxNodes ", pool.max_nodes,
                        " once its replicas are laid out; raise maxNodes or add a pool")});
    }
    if (!spread[p] && options.spread_replicas && pool.max_nodes >= 2) {
      pp.spread_relaxed = true;
      plan.warnings.push_back(absl::StrCat("pool ", pool.name,
                                           ": replicas not spread over two nodes: maxNodes ",
                                           pool.max_nodes, " leaves no room"));
    }
    pp.pool = p;
    std::vector<std::pair<int, int>> wr;
    for (const Member& m : members[p]) {
      wr.push_back({m.workload, m.replicas});
      WorkloadPlacement& wp = plan.placements[m.workload];
      wp.pool = p;
      wp.shape = m.shape;
      wp.replicas_placed = m.replicas;
      DescribeResource(pool, m.shape, &wp);
      plan.totals.gpus_before += m.replicas * std::max(1, set.workloads[m.workload].whole_gpus());
      // Before: the same replicas on whole GPUs of the pool they are planned in.
      double before_price = pool.cost_per_gpu_hour;
      plan.totals.cost_per_month_before += m.replicas *
                                           std::max(1, set.workloads[m.workload].whole_gpus()) *
                                           before_price * kHoursPerMonth;
    }
    LowerBounds lb = PoolLowerBounds(pool, set, wr, options);
    pp.lower_bound_gpus = std::max(lb.simple, lb.shape_aware);
    pp.simple_lower_bound_gpus = lb.simple;
    plan.totals.simple_lower_bound_gpus += lb.simple;
    plan.totals.gpus_after += pp.gpus_used;
    plan.totals.nodes_after += pp.nodes_used;
    plan.totals.lower_bound_gpus += pp.lower_bound_gpus;
    plan.totals.cost_per_month_after += pp.gpus_used * pool.cost_per_gpu_hour * kHoursPerMonth;
  }
  std::sort(plan.unplaceable.begin(), plan.unplaceable.end(),
            [](const Unplaceable& a, const Unplaceable& b) { return a.workload < b.workload; });
  return plan;
}

}  // namespace tessera::placement
