#include "sim/trace_bench.h"

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

TEST(TraceBench, DeflationRemovesPods) {
  absl::StatusOr<RunResult> r = RunTraceBench(Nodes(), Pods(), "random", 7, 0.2);
  ASSERT_TRUE(r.ok());
  EXPECT_LT(r->pods, 30);
  EXPECT_EQ(r->failed_pods, 0);
}

}  // namespace
}  // namespace tessera::sim
