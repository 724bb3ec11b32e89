#include "sim/trace_bench.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tessera::sim {
namespace {

using placement::gpushare::NodeSpec;
using placement::gpushare::PodSpec;

TEST(RoundHalfEven, LikePython) {
  EXPECT_EQ(RoundHalfEven(0.5), 0);
  EXPECT_EQ(RoundHalfEven(1.5), 2);
  EXPECT_EQ(RoundHalfEven(2.5), 2);
  EXPECT_EQ(RoundHalfEven(2.51), 3);
  EXPECT_EQ(RoundHalfEven(99.49), 99);
}

std::vector<NodeSpec> Nodes() {
  std::vector<NodeSpec> n;
  n.reserve(10);
  for (int i = 0; i < 10; ++i) {
    n.push_back({"node-" + std::to_string(i), 64000, 262144, 4, i < 5 ? "G2" : "T4"});
  }
  return n;
}

std::vector<PodSpec> Pods() {
  std::vector<PodSpec> pods;
  for (int i = 0; i < 30; ++i) {
    PodSpec p;
    p.name = "pod-" + std::to_string(100 + i);
    p.cpu_milli = 4000;
    p.memory_mib = 8192;
    p.num_gpu = i % 5 == 0 ? 0 : 1;
    p.gpu_milli = p.num_gpu == 0 ? 0 : (i % 3 == 0 ? 1000 : 300 + 10 * i);
    pods.push_back(p);
  }
  return pods;
}

TEST(TraceBench, ProtocolInflatesAndBuckets) {
  absl::StatusOr<RunResult> r = RunTraceBench(Nodes(), Pods(), "bestfit", 42, 1.3);
  ASSERT_TRUE(r.ok()) << r.status();
  // 40 GPUs; inflation to 130% of 40,000 milli: more pods arrive than the 30 originals.
  EXPECT_GT(r->pods, 30);
  EXPECT_EQ(r->alloc_pct[0], 0.0);
  // Allocation never exceeds arrivals or 100%, and grows with arrivals.
  for (int b = 1; b <= kMaxBucket; ++b) {
    EXPECT_LE(r->alloc_pct[b], std::min(100.0, b + 1.0)) << b;
    EXPECT_GE(r->alloc_pct[b] + 1e-9, r->alloc_pct[b - 1] - 5.0) << b;
  }
  EXPECT_GT(r->alloc_pct[130], 80.0);
  EXPECT_GT(r->failed_pods, 0);  // 130% cannot all fit
  // Same seed, same run; another seed, another order.
  absl::StatusOr<RunResult> again = RunTraceBench(Nodes(), Pods(), "bestfit", 42, 1.3);
  EXPECT_EQ(again->alloc_pct, r->alloc_pct);
  EXPECT_EQ(again->failed_pods, r->failed_pods);
  absl::StatusOr<RunResult> other = RunTraceBench(Nodes(), Pods(), "fgd", 43, 1.3);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(RunTraceBench(Nodes(), Pods(), "nope", 42, 1.3).ok());
}

// The bound is over the same arrivals as the runs: no policy's bucket exceeds it, and it is no
// more than what has arrived (nor 100%).
TEST(TraceBench, NoPolicyAllocatesMoreThanTheBound) {
  std::vector<PodSpec> pods = Pods();
  for (int i = 0; i < 12; ++i) {  // 810s, whose slivers few pods fill, as in Alibaba's trace
    PodSpec p = pods[1];
    p.name = "pod-9" + std::to_string(i);
    p.gpu_milli = 810;
    pods.push_back(p);
  }
  const std::vector<int> buckets = {50, 90, 100, 110, 130};
  for (uint64_t seed : {42, 43}) {
    absl::StatusOr<std::map<int, double>> bound =
        BoundTraceBench(Nodes(), pods, seed, 1.3, buckets);
    ASSERT_TRUE(bound.ok()) << bound.status();
    for (int b : buckets) {
      EXPECT_LE(bound->at(b), std::min(100.0, b + 1.0) + 1e-9) << b;  // a coarse trace: +-1
    }
    for (const char* policy : {"random", "bestfit", "fgd", "tessera"}) {
      absl::StatusOr<RunResult> r = RunTraceBench(Nodes(), pods, policy, seed, 1.3);
      ASSERT_TRUE(r.ok()) << r.status();
      for (int b : buckets) {
        EXPECT_LE(r->alloc_pct[b], bound->at(b) + 1e-9) << policy << " seed " << seed << " @" << b;
      }
      // Half arrived, everything fits: the bound is the arrivals, which are the runs' own (every
      // pod placed, so allocation equals them).
      if (std::string(policy) == "bestfit") {
        EXPECT_NEAR(bound->at(50), r->alloc_pct[50], 1e-9);
      }
    }
    // Past what fits, the slivers cost: below 100% at 130% arrived.
    EXPECT_LT(bound->at(130), 100.0);
  }
  EXPECT_FALSE(BoundTraceBench(Nodes(), pods, 42, 1.3, {131}).ok());
  EXPECT_FALSE(BoundTraceBench({}, pods, 42, 1.3, {100}).ok());
}

TEST(TraceBench, DeflationRemovesPods) {
  absl::StatusOr<RunResult> r = RunTraceBench(Nodes(), Pods(), "random", 7, 0.2);
  ASSERT_TRUE(r.ok());
  EXPECT_LT(r->pods, 30);
  EXPECT_EQ(r->failed_pods, 0);
}

// Arrivals are counted in GPU capacity: a cluster without GPUs or a trace without GPU pods is
// refused, not replayed for ever (CPU-only pods never reach the goal of the inflation).
TEST(TraceBench, RefusesATraceWithoutGpusOnEitherSide) {
  std::vector<PodSpec> cpu_only = Pods();
  for (PodSpec& p : cpu_only) {
    p.num_gpu = 0;
    p.gpu_milli = 0;
  }
  absl::StatusOr<RunResult> r = RunTraceBench(Nodes(), cpu_only, "fgd", 42, 1.3);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  std::vector<NodeSpec> no_gpus = Nodes();
  for (NodeSpec& n : no_gpus) n.gpus = 0;
  r = RunTraceBench(no_gpus, Pods(), "fgd", 42, 1.3);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(RunTraceBench(Nodes(), Pods(), "fgd", 42, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

PodSpec Ask(int64_t cpu, int64_t mem, int num_gpu, int64_t milli) {
  PodSpec p;
  p.cpu_milli = cpu;
  p.memory_mib = mem;
  p.num_gpu = num_gpu;
  p.gpu_milli = milli;
  return p;
}

TEST(TraceBench, AccountsEveryFreeShareOnceByWhereItLies) {
  std::vector<NodeSpec> nodes;
  // (absl::StrCat: GCC 12 at -O3 reports a false -Wrestrict in "n" + std::to_string(i).)
  nodes.reserve(4);
  for (int i = 0; i < 4; ++i) nodes.push_back({absl::StrCat("n", i), 64000, 262144, 4, "G2"});
  placement::gpushare::ClusterState state(nodes);
  // n0: a CPU-only pod leaves 3 cores; n1: one leaves 6 cores and 2 GiB. Both keep 4 GPUs free.
  state.Assign(0, Ask(61000, 1024, 0, 0), {});
  state.Assign(1, Ask(58000, 260096, 0, 0), {});
  // n2: 810 on GPU 0 (190 free), 470 + 470 on GPU 1 (60 free), a whole GPU 2, GPU 3 free.
  state.Assign(2, Ask(4000, 8192, 1, 810), {0});
  state.Assign(2, Ask(4000, 8192, 1, 470), {1});
  state.Assign(2, Ask(4000, 8192, 1, 470), {1});
  state.Assign(2, Ask(4000, 8192, 2, 1000), {2});
  // n3 untouched. The arrived GPU pods ask (8 cores, 1 GiB), (4 cores, 100 GiB) or more: n1 fits
  // the first in memory and the second in CPU, but neither whole.
  std::set<std::pair<int64_t, int64_t>> asks = {{8000, 1024}, {4000, 102400}, {9000, 204800}};
  Unallocated u = AccountUnallocated(state, asks, 100.4);
  EXPECT_DOUBLE_EQ(u.arrived_pct, 100.4);
  EXPECT_NEAR(u.stranded, 8.0, 1e-9);
  EXPECT_NEAR(u.whole, 1.0 + 4.0, 1e-9);
  EXPECT_NEAR(u.partial[1], 0.19, 1e-9);
  EXPECT_NEAR(u.partial[0], 0.06, 1e-9);
  for (size_t b = 2; b < u.partial.size(); ++b) EXPECT_EQ(u.partial[b], 0.0) << b;
  EXPECT_NEAR(u.unallocated, 16.0 - 0.81 - 0.94 - 1.0, 1e-9);
  EXPECT_NEAR(u.free_gpus(), u.unallocated, 1e-9);
  // A GPU pod asking 6 cores and 2 GiB fits n1: its GPUs are no longer stranded; n0's are.
  asks.insert({6000, 2048});
  EXPECT_NEAR(AccountUnallocated(state, asks, 100.4).stranded, 4.0, 1e-9);
}

TEST(TraceBench, UnallocatedAtFullArrivalAddsUpBothWays) {
  for (const char* policy : {"bestfit", "fgd", "tessera"}) {
    absl::StatusOr<RunResult> r = RunTraceBench(Nodes(), Pods(), policy, 42, 1.3);
    ASSERT_TRUE(r.ok()) << r.status();
    const Unallocated& u = r->at_full;
    const double capacity = 40;
    EXPECT_GE(u.arrived_pct, 100.0) << policy;
    EXPECT_LT(u.arrived_pct, 100.0 + 100.0 * 8 / capacity) << policy;  // one pod past 100%
    // The free share is everything not allocated; the failed requests are what arrived and
    // was not allocated.
    EXPECT_NEAR(u.free_gpus(), u.unallocated, 1e-9) << policy;
    EXPECT_NEAR(u.failed_gpus(), u.arrived_pct / 100 * capacity - (capacity - u.unallocated), 1e-6)
        << policy;
    EXPECT_GT(u.failed_gpus(), 0) << policy;
    EXPECT_NEAR(u.unallocated, capacity * (1 - r->alloc_pct[100] / 100), 3.0) << policy;
  }
  // Fewer arrivals than capacity: taken after the last one, nothing failed.
  absl::StatusOr<RunResult> few = RunTraceBench(Nodes(), Pods(), "fgd", 7, 0.2);
  ASSERT_TRUE(few.ok());
  EXPECT_LT(few->at_full.arrived_pct, 25.0);
  EXPECT_TRUE(few->at_full.failed.empty());
  EXPECT_NEAR(few->at_full.free_gpus(), few->at_full.unallocated, 1e-9);
}

RunResult FakeRun(const std::string& policy, uint64_t seed, double at100) {
  RunResult r;
  r.policy = policy;
  r.seed = seed;
  r.alloc_pct[100] = at100;
  r.alloc_pct[130] = at100 + 1;
  return r;
}

TEST(TraceBench, ComparesPoliciesPairedBySeed) {
  // Seed 4 has no baseline run and is left out; seed 3 ties.
  const std::vector<RunResult> runs = {
      FakeRun("fgd", 1, 90),   FakeRun("fgd", 2, 95), FakeRun("fgd", 3, 92), FakeRun("new", 1, 91),
      FakeRun("new", 2, 94.5), FakeRun("new", 3, 92), FakeRun("new", 4, 99)};
  absl::StatusOr<PairedDifference> d = ComparePaired(runs, "new", "fgd", 100);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->seeds, 3);
  EXPECT_NEAR(d->mean, 0.5 / 3, 1e-12);  // (+1 - 0.5 + 0) / 3
  // Sample standard deviation of {1, -0.5, 0} over sqrt(3).
  const double m = 0.5 / 3;
  const double sd = std::sqrt(((1 - m) * (1 - m) + (-0.5 - m) * (-0.5 - m) + m * m) / 2);
  EXPECT_NEAR(d->std_error, sd / std::sqrt(3.0), 1e-12);
  EXPECT_EQ(d->ahead, 1);
  EXPECT_EQ(d->behind, 1);
  // Against itself: no difference; one seed: no spread to estimate.
  absl::StatusOr<PairedDifference> self = ComparePaired(runs, "fgd", "fgd", 130);
  ASSERT_TRUE(self.ok());
  EXPECT_EQ(self->mean, 0);
  EXPECT_EQ(self->ahead + self->behind, 0);
  absl::StatusOr<PairedDifference> one = ComparePaired({runs[0], runs[3]}, "new", "fgd", 100);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->std_error, 0);
  EXPECT_NEAR(one->mean, 1, 1e-12);
  EXPECT_FALSE(ComparePaired(runs, "new", "bestfit", 100).ok());  // no common seed
  EXPECT_FALSE(ComparePaired(runs, "new", "fgd", 131).ok());
}

}  // namespace
}  // namespace tessera::sim
