// planner_bench: the planner's quality and speed figures (issue "Foundation ... planner"):
//   1. quality: on generated fleets of mixed models and workload mixes, gpus_after against the
//      lower bound (target: <= 1.05 x);
//   2. exactness: on small single-pool instances (<= 12 replicas), gpus_after against the
//      exact optimum from exhaustive search (target: matched in >= 95% of cases);
//   3. speed: 10,000 replicas on 2,000 GPUs, wall time of MakePlan on one core (target: < 2 s).
// Every plan is checked by ValidatePlan. Usage: planner_bench [--instances N] [--seed S]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "base/random.h"
#include "base/units.h"
#include "placement/exact_planner.h"
#include "placement/plan_validator.h"
#include "placement/planner.h"
#include "placement/test_fleets.h"

using namespace tessera;
using namespace tessera::placement;

namespace {

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
}

int CheckValid(const model::Fleet& fleet, const model::WorkloadSet& set, const Plan& plan) {
  std::vector<std::string> errors = ValidatePlan(fleet, set, plan, {});
  for (const std::string& e : errors) {
    std::fprintf(stderr, "INVALID PLAN: %s\n", e.c_str());
  }
  return errors.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessera planner quality and speed benchmark"};
  int instances = 200;
  int small_instances = 300;
  uint64_t seed = 1;
  bool verbose = false;
  app.add_flag("--verbose", verbose, "print the small instances the planner does not solve");
  app.add_option("--instances", instances, "generated fleets for the lower-bound comparison");
  app.add_option("--small", small_instances, "small instances for the exact comparison");
  app.add_option("--seed", seed, "random seed");
  CLI11_PARSE(app, argc, argv);
  int invalid = 0;

  // 1. Lower-bound ratio on generated fleets.
  {
    Random rng(seed);
    testing::GeneratorSpec spec;
    spec.workloads_min = 5;
    spec.workloads_max = 30;
    spec.replicas_min = 1;
    spec.replicas_max = 20;
    std::vector<double> ratios, simple_ratios;
    int within = 0, simple_within = 0, total_after = 0, total_lb = 0, total_simple = 0,
        total_before = 0, nospread_after = 0, nospread_within = 0;
    for (int i = 0; i < instances; ++i) {
      model::Fleet fleet;
      model::WorkloadSet set;
      testing::GenerateInstance(rng, spec, &fleet, &set);
      Plan plan = MakePlan(fleet, set, {});
      invalid += CheckValid(fleet, set, plan);
      if (plan.totals.lower_bound_gpus == 0) {
        continue;
      }
      PlannerOptions no_spread;
      no_spread.spread_replicas = false;
      Plan loose = MakePlan(fleet, set, no_spread);
      invalid += ValidatePlan(fleet, set, loose, no_spread).empty() ? 0 : 1;
      nospread_after += loose.totals.gpus_after;
      nospread_within +=
          loose.totals.gpus_after <= 1.05 * plan.totals.lower_bound_gpus + 1e-9 ? 1 : 0;
      double r = static_cast<double>(plan.totals.gpus_after) / plan.totals.lower_bound_gpus;
      ratios.push_back(r);
      within += r <= 1.05 + 1e-9 ? 1 : 0;
      double rs = static_cast<double>(plan.totals.gpus_after) / plan.totals.simple_lower_bound_gpus;
      simple_ratios.push_back(rs);
      simple_within += rs <= 1.05 + 1e-9 ? 1 : 0;
      total_after += plan.totals.gpus_after;
      total_lb += plan.totals.lower_bound_gpus;
      total_simple += plan.totals.simple_lower_bound_gpus;
      total_before += plan.totals.gpus_before;
    }
    std::printf("1. %zu generated fleets (seed %llu): %d GPUs before, %d after\n", ratios.size(),
                static_cast<unsigned long long>(seed), total_before, total_after);
    auto line = [&](const char* name, const std::vector<double>& r, int in, int lb) {
      std::printf(
          "   gpus_after / %-27s mean %.3f  median %.3f  p90 %.3f  max %.3f;  "
          "<= 1.05 in %d of %zu (%.1f%%); fleet total %.3f\n",
          name, std::accumulate(r.begin(), r.end(), 0.0) / r.size(), Percentile(r, 0.5),
          Percentile(r, 0.9), Percentile(r, 1.0), in, r.size(), 100.0 * in / r.size(),
          static_cast<double>(total_after) / lb);
    };
    line("memory/compute/MIG bound:", simple_ratios, simple_within, total_simple);
    line("shape-aware bound:", ratios, within, total_lb);
    std::printf(
        "   without spreading replicas over two nodes (--no-spread): %d GPUs, "
        "shape-aware bound ratio fleet total %.3f, <= 1.05 in %d of %zu\n",
        nospread_after, static_cast<double>(nospread_after) / total_lb, nospread_within,
        ratios.size());
  }

  // 2. Exact optimum on small instances.
  {
    Random rng(seed + 1);
    int compared = 0, matched = 0, skipped = 0, search_limit = 0, worse_by = 0;
    double exact_over_lb = 0, exact_over_strong = 0;
    for (int i = 0; compared < small_instances && i < 20 * small_instances; ++i) {
      testing::GeneratorSpec spec;
      spec.pools_min = spec.pools_max = 1;
      spec.workloads_min = 2;
      spec.workloads_max = 5;
      spec.replicas_min = 1;
      spec.replicas_max = 4;
      model::Fleet fleet;
      model::WorkloadSet set;
      testing::GenerateInstance(rng, spec, &fleet, &set);
      int replicas = 0;
      for (const auto& w : set.workloads) replicas += w.replicas;
      if (replicas > 12) {
        // Trim to at most 12 replicas.
        while (replicas > 12) {
          auto& w = set.workloads.back();
          int cut = std::min(w.replicas - 1, replicas - 12);
          if (cut <= 0) {
            replicas -= w.replicas;
            set.workloads.pop_back();
          } else {
            w.replicas -= cut;
            replicas -= cut;
          }
        }
      }
      fleet.pools[0].max_nodes = 1000;
      Plan plan = MakePlan(fleet, set, {});
      invalid += CheckValid(fleet, set, plan);
      if (!plan.unplaceable.empty()) {
        ++skipped;  // the exact search covers fully placeable instances
        continue;
      }
      std::optional<int> exact = ExactMinGpus(fleet.pools[0], set, {});
      if (!exact.has_value()) {
        ++search_limit;
        continue;
      }
      ++compared;
      if (plan.totals.gpus_after < *exact) {
        std::fprintf(stderr, "BUG: planner %d GPUs below the exact optimum %d (instance %d)\n",
                     plan.totals.gpus_after, *exact, i);
        ++invalid;
      }
      exact_over_lb +=
          static_cast<double>(*exact) / std::max(1, plan.totals.simple_lower_bound_gpus);
      exact_over_strong += static_cast<double>(*exact) / std::max(1, plan.totals.lower_bound_gpus);
      if (plan.totals.lower_bound_gpus > *exact) {
        std::fprintf(stderr, "BUG: lower bound %d above the exact optimum %d (instance %d)\n",
                     plan.totals.lower_bound_gpus, *exact, i);
        ++invalid;
      }
      if (plan.totals.gpus_after == *exact) {
        ++matched;
      } else {
        worse_by += plan.totals.gpus_after - *exact;
        if (verbose) {
          std::fprintf(stderr, "mismatch %d: %s planner %d exact %d lb %d\n", i,
                       fleet.pools[0].gpu->name.c_str(), plan.totals.gpus_after, *exact,
                       plan.totals.lower_bound_gpus);
          for (const auto& wp : plan.placements) {
            const auto& w = set.workloads[wp.workload];
            std::fprintf(stderr, "  %s x%d %s c=%lld %s -> %s slots=%d prof=%d\n", w.name.c_str(),
                         w.replicas, FormatGiB(w.memory_bytes).c_str(),
                         static_cast<long long>(w.compute_milli), model::IsolationName(w.isolation),
                         ShapeKindName(wp.shape.kind), wp.shape.slots, wp.shape.profile);
          }
        }
      }
    }
    std::printf(
        "2. exact optimum on %d small instances (<= 12 replicas); generated and skipped: "
        "%d with an unplaceable workload, %d past the search limit\n",
        compared, skipped, search_limit);
    std::printf("   matched %d (%.1f%%); the rest use %d GPUs more in total\n", matched,
                100.0 * matched / std::max(1, compared), worse_by);
    std::printf(
        "   exact optimum / memory-compute-MIG bound: mean %.3f; / shape-aware bound: "
        "mean %.3f (how loose each bound is)\n",
        exact_over_lb / std::max(1, compared), exact_over_strong / std::max(1, compared));
  }

  // 3. Speed: 10,000 replicas on 2,000 GPUs.
  {
    model::Fleet fleet{{testing::MakePool("h100", "H100-80GB", 8, 125, 125),
                        testing::MakePool("a100", "A100-80GB", 8, 125, 125)}};
    model::WorkloadSet set;
    Random rng(seed + 2);
    for (int i = 0; i < 200; ++i) {
      double iso = rng.UniformDouble();
      set.workloads.push_back(testing::MakeWorkload(
          absl::StrCat("w", i), 50, rng.UniformInt(2, 16) * kGiB, rng.UniformInt(5, 25) * 10,
          iso < 0.5 ? model::Isolation::kNone
                    : (iso < 0.8 ? model::Isolation::kMemory : model::Isolation::kFull)));
    }
    std::vector<double> seconds;
    Plan plan;
    for (int run = 0; run < 5; ++run) {
      auto start = std::chrono::steady_clock::now();
      plan = MakePlan(fleet, set, {});
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    invalid += CheckValid(fleet, set, plan);
    int placed = 0;
    for (const auto& p : plan.placements) placed += p.replicas_placed;
    std::printf(
        "3. 10,000 replicas (200 workloads) on 2,000 GPUs: MakePlan median %.3f s, "
        "min %.3f s over 5 runs (one thread)\n",
        Percentile(seconds, 0.5), Percentile(seconds, 0.0));
    std::printf("   placed %d replicas on %d GPUs (lower bound %d), %zu unplaceable entries\n",
                placed, plan.totals.gpus_after, plan.totals.lower_bound_gpus,
                plan.unplaceable.size());
  }
  if (invalid > 0) {
    std::printf("FAILED: %d invalid plans or bugs\n", invalid);
    return 1;
  }
  return 0;
}
