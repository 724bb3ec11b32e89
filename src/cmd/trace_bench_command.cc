#include "cmd/trace_bench_command.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "adapters/io/files.h"
#include "adapters/trace/openb_csv.h"
#include "base/clock.h"
#include "nlohmann/json.hpp"
#include "placement/gpushare/cluster_state.h"
#include "sim/trace_bench.h"

namespace tessera::cmd {
namespace {

// "42-51" or "42,43,50".
absl::StatusOr<std::vector<uint64_t>> ParseSeeds(const std::string& text) {
  std::vector<uint64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<std::string> range = absl::StrSplit(part, '-');
    uint64_t a = 0, b = 0;
    if (range.size() == 1 && absl::SimpleAtoi(range[0], &a)) {
      out.push_back(a);
    } else if (range.size() == 2 && absl::SimpleAtoi(range[0], &a) &&
               absl::SimpleAtoi(range[1], &b) && a <= b && b - a < 10000) {
      for (uint64_t s = a; s <= b; ++s) {
        out.push_back(s);
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--seeds: \"", part, "\" is not a seed or a range (expected e.g. 42-51 or 42,43)"));
    }
  }
  if (out.empty()) {
    return absl::InvalidArgumentError("--seeds: no seeds");
  }
  return out;
}

// Pods that no node holds even when the whole cluster is empty (the scheduler's own filter on
// an empty ClusterState): they are never placed, which is more often a node list that does not
// go with the pods (a GPU model it lacks, pods larger than its nodes) than the workload meant.
// One entry per request shape, the commonest first; empty when there are none.
std::vector<std::string> NeverPlaced(const std::vector<placement::gpushare::NodeSpec>& nodes,
                                     const std::vector<placement::gpushare::PodSpec>& pods) {
  const placement::gpushare::ClusterState empty(nodes);
  using Shape = placement::gpushare::PodSpec::RequestKey;
  std::map<Shape, bool> fits;  // per request shape, checked once
  std::map<Shape, int> never;
  for (const auto& p : pods) {
    Shape shape = p.request_key();
    auto [it, added] = fits.emplace(shape, false);
    if (added) {
      for (int i = 0; i < empty.size() && !it->second; ++i) it->second = empty.Fits(i, p);
    }
    if (!it->second) ++never[shape];
  }
  std::vector<std::pair<Shape, int>> sorted(never.begin(), never.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> out;
  for (const auto& [shape, n] : sorted) {
    const auto& [cpu, memory, num_gpu, milli, spec] = shape;
    std::string gpu = num_gpu == 0   ? "no GPU"
                      : num_gpu == 1 ? (milli < 1000 ? absl::StrCat(milli, " milli-GPU") : "1 GPU")
                                     : absl::StrCat(num_gpu, " GPUs");
    if (num_gpu > 0 && !spec.empty()) absl::StrAppend(&gpu, " of ", absl::StrJoin(spec, "|"));
    out.push_back(absl::StrCat(cpu, "m CPU, ", memory, " MiB, ", gpu, " x", n));
  }
  return out;
}

// The first kShapesNamed entries of NeverPlaced's list, and how many more there are.
std::string ShapeList(const std::vector<std::string>& shapes) {
  constexpr size_t kShapesNamed = 10;
  if (shapes.size() <= kShapesNamed) return absl::StrJoin(shapes, "; ");
  return absl::StrCat(
      absl::StrJoin(shapes.begin(), shapes.begin() + static_cast<long>(kShapesNamed), "; "),
      "; and ", shapes.size() - kShapesNamed, " other shapes");
}

// Where the unallocated GPUs are once 100% has arrived: one column per policy (means over its
// seeds), a row per failed request shape and per place the free share lies; rows below 0.05
// GPUs in every column are left out.
void PrintExplanation(const std::vector<std::string>& policies,
                      const std::vector<sim::RunResult>& runs) {
  struct Column {
    int n = 0;
    double arrived = 0, unallocated = 0, failed = 0, free = 0, stranded = 0, whole = 0;
    std::map<std::pair<int, int64_t>, double> failed_by;
    std::array<double, 10> partial{};
  };
  std::vector<Column> cols(policies.size());
  for (size_t c = 0; c < policies.size(); ++c) {
    Column& col = cols[c];
    for (const sim::RunResult& r : runs) {
      if (r.policy != policies[c]) continue;
      const sim::Unallocated& u = r.at_full;
      ++col.n;
      col.arrived += u.arrived_pct;
      col.unallocated += u.unallocated;
      col.failed += u.failed_gpus();
      col.free += u.free_gpus();
      col.stranded += u.stranded;
      col.whole += u.whole;
      for (const auto& [ask, count] : u.failed) col.failed_by[ask] += count.second;
      for (size_t b = 0; b < col.partial.size(); ++b) col.partial[b] += u.partial[b];
    }
  }
  std::set<std::pair<int, int64_t>, std::greater<>> asks;
  for (const Column& col : cols) {
    for (const auto& [ask, gpus] : col.failed_by) asks.insert(ask);
  }
  std::printf(
      "\nWhere the unallocated GPUs are once 100%% of capacity has arrived (GPUs, mean over "
      "seeds)\n%-44s",
      "");
  for (const std::string& p : policies) std::printf(" %10s", p.c_str());
  std::printf("\n");
  auto row = [&](const std::string& label, auto value) {
    double most = 0;
    for (const Column& col : cols) most = std::max(most, std::fabs(value(col) / col.n));
    if (most < 0.05) return;
    std::printf("%-44s", label.c_str());
    for (const Column& col : cols) std::printf(" %10.1f", value(col) / col.n);
    std::printf("\n");
  };
  row("arrived, % of capacity", [](const Column& c) { return c.arrived; });
  row("unallocated (capacity - allocated)", [](const Column& c) { return c.unallocated; });
  row("failed pods' request", [](const Column& c) { return c.failed; });
  for (const auto& ask : asks) {
    row(absl::StrFormat("  %d GPU x %d milli", ask.first, ask.second), [&](const Column& c) {
      auto it = c.failed_by.find(ask);
      return it == c.failed_by.end() ? 0.0 : it->second;
    });
  }
  row("free share", [](const Column& c) { return c.free; });
  row("  on nodes no arrived GPU pod fits (CPU/mem)", [](const Column& c) { return c.stranded; });
  row("  whole GPUs", [](const Column& c) { return c.whole; });
  for (size_t b = 0; b < 10; ++b) {
    row(absl::StrFormat("  partly used GPUs, %d-%d milli free", 100 * b, 100 * b + 99),
        [&](const Column& c) { return c.partial[b]; });
  }
}

// Every policy but `baseline` against it, paired by seed, at 100% and 130% arrived (or the
// largest bucket reached when --inflate is below 1.3).
absl::Status PrintPaired(const std::vector<std::string>& policies, const std::string& baseline,
                         int last_bucket, const std::vector<sim::RunResult>& runs) {
  std::vector<int> buckets = {std::min(100, last_bucket)};
  if (last_bucket > 100) buckets.push_back(last_bucket);
  std::printf(
      "\nPaired by seed against %s: allocation difference in percentage points, mean +/- "
      "standard error (seeds ahead / behind)\n%-10s",
      baseline.c_str(), "policy");
  for (int b : buckets) std::printf(" %28s", absl::StrCat("@", b).c_str());
  std::printf("\n");
  for (const std::string& policy : policies) {
    if (policy == baseline) continue;
    std::printf("%-10s", policy.c_str());
    for (int b : buckets) {
      absl::StatusOr<sim::PairedDifference> d = sim::ComparePaired(runs, policy, baseline, b);
      if (!d.ok()) return d.status();
      std::printf(" %28s", absl::StrFormat("%+.3f +/- %.3f (%d / %d)", d->mean, d->std_error,
                                           d->ahead, d->behind)
                               .c_str());
    }
    std::printf("\n");
  }
  return absl::OkStatus();
}

}  // namespace

int RunTraceBench(const TraceBenchFlags& flags) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "tessera trace-bench: " << s.message() << "\n";
    return 1;
  };
  absl::StatusOr<std::vector<uint64_t>> seeds = ParseSeeds(flags.seeds);
  if (!seeds.ok()) {
    return fail(seeds.status());
  }
  if (!(flags.inflate > 0 && flags.inflate <= 10)) {
    return fail(absl::InvalidArgumentError(
        "--inflate: expected a ratio above 0 and at most 10, such as 1.3"));
  }
  placement::gpushare::TieBreak ties;
  if (flags.ties == "first") {
    ties = placement::gpushare::TieBreak::kFirstInOrder;
  } else if (flags.ties == "random") {
    ties = placement::gpushare::TieBreak::kRandom;
  } else {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--ties: expected first or random, found \"", flags.ties, "\"")));
  }
  if (!flags.json_file.empty()) {
    if (absl::Status s = adapters::CheckWritable(flags.json_file); !s.ok()) {
      return fail(absl::Status(s.code(), absl::StrCat("--json: ", s.message())));
    }
  }
  absl::StatusOr<std::string> nodes_text = adapters::ReadFile(flags.nodes_file);
  if (!nodes_text.ok()) {
    return fail(nodes_text.status());
  }
  absl::StatusOr<std::string> pods_text = adapters::ReadFile(flags.pods_file);
  if (!pods_text.ok()) {
    return fail(pods_text.status());
  }
  auto nodes = adapters::ParseOpenbNodes(flags.nodes_file, *nodes_text);
  if (!nodes.ok()) {
    return fail(nodes.status());
  }
  auto pods = adapters::ParseOpenbPods(flags.pods_file, *pods_text);
  if (!pods.ok()) {
    return fail(pods.status());
  }
  // Arrivals and allocation are shares of the GPU capacity: without GPUs on the nodes or GPU
  // requests among the pods there is nothing to measure (and no inflation would end).
  int64_t total_gpus = 0;
  for (const auto& n : *nodes) {
    total_gpus += n.gpus;
  }
  if (total_gpus == 0) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        flags.nodes_file, ": no node has a GPU (every gpu is 0), and allocation is a share of ",
        "the GPU capacity; use a GPU node list such as openb_node_list_gpu_node.csv")));
  }
  if (std::none_of(pods->begin(), pods->end(), [](const auto& p) { return p.num_gpu > 0; })) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        flags.pods_file, ": no pod asks for a GPU (every num_gpu is 0), and arrivals are ",
        "counted as a share of the GPU capacity, which CPU-only pods never reach")));
  }
  if (std::vector<std::string> never = NeverPlaced(*nodes, *pods); !never.empty()) {
    // What the node list offers, to set beside them: its largest node by each measure, and its
    // GPU models.
    int64_t cpu = 0, memory = 0;
    int gpus = 0;
    std::set<std::string> models;
    for (const auto& n : *nodes) {
      cpu = std::max(cpu, n.cpu_milli);
      memory = std::max(memory, n.memory_mib);
      gpus = std::max(gpus, n.gpus);
      if (n.gpus > 0) models.insert(n.model);
    }
    std::cerr << "tessera trace-bench: warning: " << flags.pods_file << ": pods that no node of "
              << flags.nodes_file
              << " holds even empty, so they are never placed: " << ShapeList(never)
              << " (the most on one node: " << cpu << "m CPU, " << memory << " MiB, " << gpus
              << " GPUs; GPU models " << absl::StrJoin(models, ", ") << ")\n";
  }
  std::vector<std::string> policies = absl::StrSplit(flags.policies, ',', absl::SkipEmpty());
  if (!flags.baseline.empty() &&
      std::find(policies.begin(), policies.end(), flags.baseline) == policies.end()) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--baseline: \"", flags.baseline, "\" is not in --policy ", flags.policies)));
  }
  std::vector<sim::RunResult> runs;
  for (const std::string& policy : policies) {
    for (uint64_t seed : *seeds) {
      absl::StatusOr<sim::RunResult> r =
          sim::RunTraceBench(*nodes, *pods, policy, seed, flags.inflate, ties);
      if (!r.ok()) {
        return fail(r.status());
      }
      runs.push_back(*r);
    }
  }
  // Table: mean over seeds.
  const int points[] = {70, 80, 90, 95, 100, 110, 120, 130};
  std::printf("%-10s", "policy");
  for (int p : points) {
    std::printf(" %7s", absl::StrCat("@", p).c_str());
  }
  std::printf(" %9s %7s %8s\n", "unalloc@100", "failed", "cpu_s");
  for (const std::string& policy : policies) {
    double alloc[std::size(points)] = {};
    double unalloc = 0, failed = 0, seconds = 0;
    int n = 0;
    for (const sim::RunResult& r : runs) {
      if (r.policy != policy) {
        continue;
      }
      ++n;
      for (size_t i = 0; i < std::size(points); ++i) {
        alloc[i] += r.alloc_pct[points[i]];
      }
      unalloc += (1.0 - r.alloc_pct[100] / 100.0) * static_cast<double>(total_gpus);
      failed += r.failed_pods;
      seconds += r.runtime_s;
    }
    std::printf("%-10s", policy.c_str());
    for (double a : alloc) {
      std::printf(" %7.2f", a / n);
    }
    std::printf(" %11.0f %7.0f %8.2f\n", unalloc / n, failed / n, seconds);
  }
  if (flags.bound) {
    // No policy, online or offline, allocates more than this: the same arrivals per seed.
    const double start = ProcessCpuSeconds();
    double bound[std::size(points)] = {};
    double at100 = 0;
    for (uint64_t seed : *seeds) {
      absl::StatusOr<std::map<int, double>> b =
          sim::BoundTraceBench(*nodes, *pods, seed, flags.inflate,
                               std::vector<int>(std::begin(points), std::end(points)));
      if (!b.ok()) return fail(b.status());
      for (size_t i = 0; i < std::size(points); ++i) bound[i] += b->at(points[i]);
      at100 += b->at(100);
    }
    const double n = static_cast<double>(seeds->size());
    std::printf("%-10s", "bound");
    for (double b : bound) std::printf(" %7.2f", b / n);
    std::printf(" %11.0f %7s %8.2f\n", (1.0 - at100 / n / 100.0) * static_cast<double>(total_gpus),
                "-", ProcessCpuSeconds() - start);
    std::printf(
        "(bound: the most any placement of the arrived pods could allocate, a linear "
        "programming bound over their GPU shares; unalloc@100: the fewest GPUs it leaves)\n");
  }
  if (!flags.baseline.empty()) {
    const int last_bucket =
        std::min(sim::kMaxBucket, static_cast<int>(std::floor(flags.inflate * 100 + 1e-9)));
    if (absl::Status s = PrintPaired(policies, flags.baseline, last_bucket, runs); !s.ok()) {
      return fail(s);
    }
  }
  if (flags.explain) {
    PrintExplanation(policies, runs);
  }
  if (!flags.json_file.empty()) {
    nlohmann::json j;
    j["nodes_file"] = flags.nodes_file;
    j["pods_file"] = flags.pods_file;
    j["total_gpus"] = total_gpus;
    j["inflate"] = flags.inflate;
    j["runs"] = nlohmann::json::array();
    for (const sim::RunResult& r : runs) {
      nlohmann::json alloc = nlohmann::json::object(), frag = nlohmann::json::object();
      for (int b = 0; b <= sim::kMaxBucket; ++b) {
        alloc[std::to_string(b)] = std::round(r.alloc_pct[b] * 100.0) / 100.0;
        frag[std::to_string(b)] = std::round(r.frag_pct[b] * 100.0) / 100.0;
      }
      j["runs"].push_back({{"policy", r.policy},
                           {"seed", r.seed},
                           {"runtime_s", std::round(r.runtime_s * 1000.0) / 1000.0},
                           {"failed_pods", r.failed_pods},
                           {"alloc_pct", alloc},
                           {"frag_pct", frag}});
    }
    if (absl::Status s = adapters::WriteFileAtomically(flags.json_file, j.dump(1) + "\n");
        !s.ok()) {
      return fail(s);
    }
  }
  return 0;
}

}  // namespace tessera::cmd
