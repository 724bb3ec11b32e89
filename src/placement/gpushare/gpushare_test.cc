#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "placement/gpushare/cluster_state.h"
#include "placement/gpushare/fragmentation.h"
#include "placement/gpushare/policies.h"
#include "placement/gpushare/scheduler.h"

namespace tessera::placement::gpushare {
namespace {

PodSpec Pod(int64_t cpu, int num_gpu, int64_t milli, std::vector<std::string> spec = {}) {
  PodSpec p;
  p.name = "p";
  p.cpu_milli = cpu;
  p.memory_mib = 1024;
  p.num_gpu = num_gpu;
  p.gpu_milli = milli;
  p.gpu_spec = std::move(spec);
  return p;
}

std::vector<NodeSpec> TwoNodes() {
  return {{"a", 32000, 262144, 4, "G2"}, {"b", 16000, 131072, 2, "T4"}};
}

TEST(ClusterState, FilterAndAssign) {
  ClusterState s(TwoNodes());
  EXPECT_EQ(s.total_gpu_milli(), 6000);
  EXPECT_TRUE(s.Fits(0, Pod(8000, 1, 500)));
  EXPECT_FALSE(s.Fits(1, Pod(17000, 0, 0)));           // CPU
  EXPECT_FALSE(s.Fits(1, Pod(1000, 4, 1000)));         // GPUs
  EXPECT_FALSE(s.Fits(0, Pod(1000, 1, 500, {"T4"})));  // model
  EXPECT_TRUE(s.Fits(1, Pod(1000, 1, 500, {"T4", "V100M16"})));
  s.Assign(0, Pod(8000, 1, 600), {2});
  EXPECT_EQ(s.node(0).gpu_free, (std::vector<int64_t>{1000, 1000, 400, 1000}));
  EXPECT_EQ(s.node(0).cpu_free, 24000);
  EXPECT_EQ(s.used_gpu_milli(), 600);
  EXPECT_EQ(s.node(0).version, 1u);
  // Whole GPUs need fully free ones: three are left.
  EXPECT_TRUE(s.Fits(0, Pod(1000, 3, 1000)));
  EXPECT_FALSE(s.Fits(0, Pod(1000, 4, 1000)));
}

TEST(BestFitGpus, TightestShareLowestIndexWhole) {
  NodeState n;
  n.gpu_free = {1000, 300, 700, 300, 1000};
  EXPECT_EQ(BestFitGpus(n, Pod(0, 1, 250)), std::vector<int>{1});  // least free that fits, first
  EXPECT_EQ(BestFitGpus(n, Pod(0, 1, 500)), std::vector<int>{2});
  EXPECT_EQ(BestFitGpus(n, Pod(0, 2, 1000)), (std::vector<int>{0, 4}));
  EXPECT_TRUE(BestFitGpus(n, Pod(0, 3, 1000)).empty());
  EXPECT_TRUE(BestFitGpus(n, Pod(0, 0, 0)).empty());
}

TEST(Fragmentation, FormulaOnAHandExample) {
  // One class, a 500-milli GPU task with 4000 CPU: a node's fragment is its free slivers below
  // 500, or everything when the class cannot run there.
  TargetWorkload m;
  m.classes.push_back({4000, 1, 500, {}, 1.0, 1});
  ClusterState s(TwoNodes());
  s.Assign(0, Pod(1000, 1, 700), {0});  // GPU0: 300 left (a sliver)
  s.Assign(0, Pod(1000, 1, 600), {1});  // GPU1: 400 left (a sliver)
  EXPECT_DOUBLE_EQ(NodeFragmentation(s, s.node(0), m), 700);
  // CPU too short for the class: all free GPU counts.
  s.Assign(0, Pod(27000, 0, 0), {});
  EXPECT_DOUBLE_EQ(NodeFragmentation(s, s.node(0), m), 2700);
  // A CPU-only class counts every idle GPU; model-restricted class on another model too.
  TargetWorkload cpu_only;
  cpu_only.classes.push_back({1000, 0, 0, {}, 1.0, 1});
  EXPECT_DOUBLE_EQ(NodeFragmentation(s, s.node(1), cpu_only), 2000);
  TargetWorkload t4_only;
  t4_only.classes.push_back({1000, 1, 500, {"T4"}, 1.0, 1});
  EXPECT_DOUBLE_EQ(NodeFragmentation(s, s.node(1), t4_only), 0);
}

// F_n(M) straight from the definition, one class at a time (what NodeFragmentation's grouped
// computation must equal).
double FragmentationByDefinition(const ClusterState& s, const NodeState& n,
                                 const TargetWorkload& m) {
  double f = 0;
  for (const TaskClass& c : m.classes) {
    int room = 0;
    int64_t sliver = 0;
    for (int64_t g : n.gpu_free) {
      if (g >= c.gpu_milli) {
        ++room;
      } else {
        sliver += g;
      }
    }
    bool runs = c.gpu_milli > 0 && n.cpu_free >= c.cpu_milli && room >= c.num_gpu &&
                s.ModelAllowed(n.model, c.gpu_spec);
    f += c.weight * static_cast<double>(runs ? sliver : n.gpu_free_total());
  }
  return f;
}

TEST(Fragmentation, GroupedComputationEqualsTheDefinition) {
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  const std::vector<std::vector<std::string>> specs = {{}, {"G2"}, {"T4"}, {"T4", "V100M16"}};
  for (int round = 0; round < 200; ++round) {
    TargetWorkload m;
    const int classes = 1 + pick(60);
    for (int i = 0; i < classes; ++i) {
      const int kind = pick(4);  // CPU-only, shared, whole, multi-GPU
      TaskClass c;
      c.cpu_milli = int64_t{1000} * pick(40);
      c.num_gpu = kind == 0 ? 0 : kind == 3 ? 2 + pick(3) : 1;
      c.gpu_milli = kind == 0 ? 0 : kind == 1 ? 50 * (1 + pick(19)) : 1000;
      c.gpu_spec = specs[pick(4)];
      c.weight = 1.0 / classes;
      m.classes.push_back(c);
    }
    m.Index();
    ClusterState s({{"a", 64000, 262144, 8, "G2"}, {"b", 32000, 131072, 4, "T4"}});
    for (int node = 0; node < 2; ++node) {
      for (int k = 0; k < 12; ++k) {
        PodSpec p = Pod(int64_t{1000} * pick(8), 1, int64_t{50} * (1 + pick(19)));
        std::vector<int> gpus = BestFitGpus(s.node(node), p);
        if (s.Fits(node, p) && !gpus.empty()) s.Assign(node, p, gpus);
      }
      EXPECT_NEAR(NodeFragmentation(s, s.node(node), m),
                  FragmentationByDefinition(s, s.node(node), m), 1e-9)
          << "round " << round << " node " << node;
    }
  }
}

TEST(Fragmentation, IncrementalCountsMatchTheBatchBuildAndStayPerClass) {
  std::vector<PodSpec> pods;
  TaskClassCounts counts;
  for (int i = 0; i < 30000; ++i) {
    PodSpec p =
        i % 7 == 0 ? Pod(4000, 2, 1000, {"V100"}) : Pod(int64_t{1000} * (1 + i % 3), 1, 250);
    pods.push_back(p);
    counts.Add(p);
  }
  TargetWorkload batch = BuildTargetWorkload(pods, 1.0);
  TargetWorkload inc = counts.Build(1.0);
  EXPECT_EQ(counts.total(), 30000);
  ASSERT_EQ(inc.classes.size(), 4u);  // four distinct classes, however many pods
  ASSERT_EQ(batch.classes.size(), inc.classes.size());
  for (size_t i = 0; i < inc.classes.size(); ++i) {
    EXPECT_EQ(inc.classes[i].count, batch.classes[i].count);
    EXPECT_EQ(inc.classes[i].cpu_milli, batch.classes[i].cpu_milli);
    EXPECT_DOUBLE_EQ(inc.classes[i].weight, batch.classes[i].weight);
  }
}

TEST(Fragmentation, TargetWorkloadTakesPopularKeysTenAtATime) {
  std::vector<PodSpec> pods;
  for (int k = 0; k < 25; ++k) {
    for (int i = 0; i < 100 - 3 * k; ++i) {
      pods.push_back(Pod(int64_t{1000} * (k + 1), 1, 100));
    }
  }
  TargetWorkload t = BuildTargetWorkload(pods, 0.5, 10);
  ASSERT_EQ(t.classes.size(), 10u);  // the first 10 keys already cover >= 50%
  EXPECT_EQ(t.classes[0].count, 100);
  double sum = 0;
  for (const TaskClass& c : t.classes) {
    sum += c.weight;
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_EQ(BuildTargetWorkload(pods, 0.95, 10).classes.size(), 25u);
}

TEST(Policies, FgdPicksTheGpuThatFragmentsLeast) {
  // Target: 500-milli tasks. On GPUs with 600 and 1000 free, a 500 task should go to the 600
  // GPU (leaving a 100 sliver) rather than the whole GPU (leaving 500, still usable, but the
  // 600 GPU would stay a sliver... both leave F unchanged or not): check the score ordering.
  TargetWorkload m;
  m.classes.push_back({0, 1, 500, {}, 1.0, 1});
  m.classes[0].cpu_milli = 1000;
  std::vector<NodeSpec> nodes = {{"a", 32000, 262144, 2, "G2"}};
  ClusterState s(nodes);
  s.Assign(0, Pod(1000, 1, 400), {0});  // GPU0: 600 free, GPU1: 1000 free
  auto fgd = *MakePolicy("fgd", m);
  Choice c = fgd->Score(s, 0, Pod(1000, 1, 500));
  // GPU0 -> 100 sliver (F 0 -> 100); GPU1 -> 500 left, still fits a 500 task (F stays 0).
  EXPECT_EQ(c.gpus, std::vector<int>{1});
  EXPECT_EQ(c.score, 50);
  auto bestfit = *MakePolicy("bestfit", m);
  EXPECT_EQ(bestfit->Score(s, 0, Pod(1000, 1, 500)).gpus, std::vector<int>{0});
  EXPECT_FALSE(MakePolicy("nope", m).ok());
}

// FGD's score of a sharing pod on every GPU with room, by brute force: the best, the first GPU
// on ties (what FgdChoice returns while scoring only the first GPU of each free value).
Choice FgdByEveryGpu(const ClusterState& state, int node, const PodSpec& pod,
                     const TargetWorkload& target) {
  const NodeState& n = state.node(node);
  const double before = NodeFragmentation(state, n, target);
  Choice best{-1, {}};
  for (size_t j = 0; j < n.gpu_free.size(); ++j) {
    if (n.gpu_free[j] < pod.gpu_milli) continue;
    NodeState after = n;
    after.cpu_free -= pod.cpu_milli;
    after.memory_free -= pod.memory_mib;
    after.gpu_free[j] -= pod.gpu_milli;
    const double delta = NodeFragmentation(state, after, target) - before;
    const int64_t score = static_cast<int64_t>(100.0 / (1.0 + std::exp(delta / 1000.0)));
    if (score > best.score) best = {score, {static_cast<int>(j)}};
  }
  return best;
}

TEST(Policies, FgdScoresEquallyFreeGpusOnceAndKeepsTheFirst) {
  std::mt19937 rng(11);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  int with_repeats = 0;
  for (int round = 0; round < 300; ++round) {
    TargetWorkload m;
    for (int i = 0, classes = 1 + pick(12); i < classes; ++i) {
      TaskClass c;
      c.cpu_milli = int64_t{1000} * pick(16);
      c.num_gpu = 1 + (pick(4) == 0 ? pick(3) : 0);
      c.gpu_milli = c.num_gpu > 1 ? 1000 : 50 * (1 + pick(20));
      c.weight = 1.0 / classes;
      m.classes.push_back(c);
    }
    m.Index();
    ClusterState s({{"a", 96000, 1 << 20, 8, "G2"}});
    // Shares from a few values, so that several GPUs are often equally free.
    for (int k = 0, placed = pick(14); k < placed; ++k) {
      PodSpec p = Pod(1000, 1, std::vector<int64_t>{250, 500, 750}[pick(3)]);
      std::vector<int> gpus = BestFitGpus(s.node(0), p);
      if (s.Fits(0, p) && !gpus.empty()) s.Assign(0, p, gpus);
    }
    const std::vector<int64_t>& free = s.node(0).gpu_free;
    with_repeats += std::set<int64_t>(free.begin(), free.end()).size() < free.size() ? 1 : 0;
    PodSpec pod = Pod(int64_t{1000} * pick(8), 1, int64_t{50} * (1 + pick(19)));
    if (!s.Fits(0, pod)) continue;
    Choice got = FgdChoice(s, 0, pod, m);
    Choice want = FgdByEveryGpu(s, 0, pod, m);
    EXPECT_EQ(got.score, want.score) << "round " << round;
    EXPECT_EQ(got.gpus, want.gpus) << "round " << round;
  }
  EXPECT_GT(with_repeats, 200);  // the case the shortcut is for did occur
}

// The cached scheduler against a scan that scores every node afresh, over several pod classes
// and a shuffled node order: the same node and GPUs at every step.
TEST(Scheduler, CachedDecisionsEqualAFreshScanAcrossClassesAndOrder) {
  std::mt19937 rng(5);
  std::vector<NodeSpec> nodes;
  nodes.reserve(24);
  for (int i = 0; i < 24; ++i) {
    nodes.push_back({"n" + std::to_string(i), 32000 + 16000 * (i % 3), 1 << 20, 2 + 2 * (i % 4),
                     i % 5 == 0 ? "T4" : "G2"});
  }
  const std::vector<PodSpec> classes = {Pod(2000, 1, 500),  Pod(4000, 1, 250),
                                        Pod(8000, 1, 1000), Pod(1000, 2, 1000),
                                        Pod(6000, 0, 0),    Pod(2000, 1, 750, {"T4"})};
  TargetWorkload target = BuildTargetWorkload(classes);
  auto fgd = *MakePolicy("fgd", target);
  ClusterState s(nodes);
  std::vector<int> order(nodes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::shuffle(order.begin(), order.end(), rng);
  Random tie_rng(1);
  Scheduler sched(s, *fgd, tie_rng, static_cast<int>(classes.size()), order);
  int placed = 0;
  for (int step = 0; step < 400; ++step) {
    const int c = static_cast<int>(rng() % classes.size());
    int want_node = -1;
    Choice want;
    for (int n : order) {
      if (!s.Fits(n, classes[c])) continue;
      Choice ch = fgd->Score(s, n, classes[c]);
      if (want_node < 0 || std::pair(ch.score, ch.tie) > std::pair(want.score, want.tie)) {
        want_node = n;
        want = ch;
      }
    }
    std::optional<Decision> got = sched.Schedule(classes[c], c);
    ASSERT_EQ(got.has_value(), want_node >= 0) << "step " << step;
    if (!got) continue;
    ++placed;
    EXPECT_EQ(got->node, want_node) << "step " << step;
    EXPECT_EQ(got->gpus, want.gpus) << "step " << step;
  }
  EXPECT_GT(placed, 100);
  EXPECT_LT(placed, 400);  // the cluster filled up: the no-fit path ran too
}

TEST(Scheduler, PicksHighestScoreAndCachesPerNodeVersion) {
  std::vector<NodeSpec> nodes = {{"a", 128000, 1 << 20, 8, "G2"}, {"b", 128000, 1 << 20, 8, "G2"}};
  ClusterState s(nodes);
  TargetWorkload none;
  auto bestfit = *MakePolicy("bestfit", none);
  Random rng(1);
  Scheduler sched(s, *bestfit, rng, 1);
  // BestFit packs: after the first pod lands on node 0 (tie -> first in order), node 0 is
  // tighter and keeps winning.
  for (int i = 0; i < 8; ++i) {
    std::optional<Decision> d = sched.Schedule(Pod(4000, 1, 1000), 0);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->node, 0) << i;
  }
  std::optional<Decision> d = sched.Schedule(Pod(4000, 1, 1000), 0);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->node, 1);
  EXPECT_EQ(s.used_gpu_milli(), 9000);
  // Nothing fits a 9-GPU pod.
  EXPECT_FALSE(sched.Schedule(Pod(1000, 9, 1000), 0).has_value());
}

}  // namespace
}  // namespace tessera::placement::gpushare

namespace tessera::placement::gpushare {
namespace {

TEST(TesseraPolicy, LearnsOnlyFromArrivals) {
  auto policy = *MakePolicy("tessera", TargetWorkload{});
  std::vector<NodeSpec> nodes = {{"a", 64000, 1 << 20, 2, "G2"}};
  ClusterState s(nodes);
  s.Assign(0, Pod(1000, 1, 400), {0});  // GPU0: 600 free, GPU1: 1000 free
  // Nothing has arrived: no class to fragment for, every placement scores the same.
  EXPECT_EQ(policy->epoch(), 0u);
  Choice blind = policy->Score(s, 0, Pod(1000, 1, 500));
  EXPECT_EQ(blind.score, 50);
  // After 500-milli tasks arrive, it keeps GPU1 whole for them: putting this one on GPU0
  // leaves a 100 sliver, on GPU1 a 500 hole that still fits one.
  for (int i = 0; i < 4; ++i) {
    policy->Observe(Pod(1000, 1, 500));
  }
  EXPECT_GT(policy->epoch(), 0u);
  Choice learned = policy->Score(s, 0, Pod(1000, 1, 500));
  EXPECT_EQ(learned.gpus, std::vector<int>{1});
}

// A CPU-only pod takes CPU that GPU pods could otherwise use: among nodes that score the same,
// Tessera puts it where the least GPU is free (none here on node b), FGD on the first in order.
TEST(TesseraPolicy, CpuOnlyPodsGoWhereTheLeastGpuIsFree) {
  std::vector<NodeSpec> nodes = {{"a", 64000, 1 << 20, 2, "G2"},
                                 {"b", 64000, 1 << 20, 2, "G2"},
                                 {"c", 64000, 1 << 20, 2, "G2"}};
  for (const char* name : {"fgd", "tessera"}) {
    TargetWorkload target;  // FGD's: one 500-milli class with little CPU
    target.classes.push_back({1000, 1, 500, {}, 1.0, 1});
    auto policy = *MakePolicy(name, target);
    policy->Observe(Pod(1000, 1, 500));
    ClusterState s(nodes);
    s.Assign(1, Pod(1000, 2, 1000), {0, 1});  // b: every GPU allocated
    s.Assign(2, Pod(1000, 1, 1000), {0});     // c: one GPU free
    Random rng(1);
    Scheduler sched(s, *policy, rng, 1);
    std::optional<Decision> d = sched.Schedule(Pod(8000, 0, 0), 0);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->node, std::string(name) == "tessera" ? 1 : 0) << name;
    // A GPU pod is placed as FGD places it (no tie-break of its own).
    Choice gpu_pod = policy->Score(s, 0, Pod(1000, 1, 500));
    EXPECT_EQ(gpu_pod.tie, 0) << name;
  }
  // Then the node with one free GPU before the one with two.
  auto tessera = *MakePolicy("tessera", TargetWorkload{});
  ClusterState s(nodes);
  s.Assign(2, Pod(1000, 1, 1000), {0});
  EXPECT_GT(tessera->Score(s, 2, Pod(8000, 0, 0)).tie, tessera->Score(s, 0, Pod(8000, 0, 0)).tie);
}

}  // namespace
}  // namespace tessera::placement::gpushare
