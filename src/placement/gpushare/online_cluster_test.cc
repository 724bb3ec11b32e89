#include "placement/gpushare/online_cluster.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/gpushare/tessera_policy.h"

namespace tessera::placement::gpushare {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

OnlineNode H100(const std::string& name, int gpus = 8) {
  return {.name = name, .gpus = gpus, .model = "H100-80GB", .gpu_memory_bytes = 80 * kGi};
}

GpuRequest Share(int64_t memory_gib, int64_t compute_milli) {
  return {.num_gpu = 1,
          .memory_bytes = memory_gib * kGi,
          .compute_milli = compute_milli,
          .models = {},
          .user = ""};
}

GpuRequest Whole(int n) {
  return {.num_gpu = n, .memory_bytes = 0, .compute_milli = kGpuMilli, .models = {}, .user = ""};
}

TEST(OnlineCluster, ShareIsTheLargerOfComputeAndMemory) {
  OnlineCluster c(MakeTesseraPolicy());
  OnlineNode h = H100("a");
  EXPECT_EQ(*c.ShareOn(Share(20, 100), h), 250);  // 20/80 of the memory
  EXPECT_EQ(*c.ShareOn(Share(8, 300), h), 300);   // compute dominates
  EXPECT_EQ(*c.ShareOn(Share(1, 1), h), 13);      // ceil(1000/80)
  EXPECT_EQ(*c.ShareOn(Whole(2), h), kGpuMilli);
  EXPECT_FALSE(c.ShareOn(Share(81, 100), h).ok());  // larger than the GPU
  EXPECT_FALSE(c.ShareOn(Whole(9), h).ok());
  GpuRequest l4_only = Share(8, 100);
  l4_only.models = {"L4"};
  EXPECT_FALSE(c.ShareOn(l4_only, h).ok());
  EXPECT_FALSE(c.ShareOn(Share(8, 100),
                         OnlineNode{.name = "cpu", .gpus = 0, .model = "", .gpu_memory_bytes = 0})
                   .ok());
}

TEST(OnlineCluster, FilterSeparatesFullFromNeverFits) {
  OnlineCluster c(MakeTesseraPolicy());
  c.UpsertNode(H100("a", 1));
  c.UpsertNode(H100("b", 1));
  c.UpsertNode({.name = "cpu", .gpus = 0, .model = "", .gpu_memory_bytes = 0});
  ASSERT_TRUE(c.Reserve("p1", Share(60, 100), "a").ok());  // 750 milli on a's only GPU
  FilterOutcome f = c.Filter(Share(40, 100), {"a", "b", "cpu", "ghost"});
  EXPECT_EQ(f.fit, std::vector<std::string>{"b"});
  EXPECT_EQ(f.failed.count("a"), 1u);
  EXPECT_EQ(f.unresolvable.count("cpu"), 1u);
  EXPECT_EQ(f.unresolvable.count("ghost"), 1u);
  // A pod that asks for no GPU fits everywhere.
  EXPECT_EQ(c.Filter(GpuRequest{}, {"a", "cpu"}).fit.size(), 2u);
}

TEST(OnlineCluster, ReserveReleaseAndIdempotence) {
  OnlineCluster c(MakeTesseraPolicy());
  c.UpsertNode(H100("a", 2));
  absl::StatusOr<Assignment> a = c.Reserve("p1", Share(40, 100), "a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->milli_per_gpu, 500);
  EXPECT_EQ(a->gpus.size(), 1u);
  EXPECT_EQ(c.used_milli(), 500);
  // A retried bind to the same node returns the same GPUs; to another node, an error.
  EXPECT_EQ(*c.Reserve("p1", Share(40, 100), "a"), *a);
  c.UpsertNode(H100("b", 2));
  EXPECT_FALSE(c.Reserve("p1", Share(40, 100), "b").ok());
  // Whole GPUs need fully free ones.
  EXPECT_FALSE(c.Reserve("p2", Whole(2), "a").ok());
  ASSERT_TRUE(c.Reserve("p3", Whole(1), "a").ok());
  EXPECT_EQ(c.used_milli(), 1500);
  c.Release("p1");
  c.Release("p1");  // no-op
  EXPECT_EQ(c.used_milli(), 1000);
  EXPECT_EQ(c.pods(), 1);
}

TEST(OnlineCluster, PrioritizeRanksByPolicyScaledToMax) {
  OnlineCluster c(MakeTesseraPolicy());
  for (const char* n : {"a", "b", "c"}) {
    c.UpsertNode(H100(n, 1));
  }
  ASSERT_TRUE(c.Restore("x", {.node = "b", .gpus = {0}, .milli_per_gpu = 500, .user = ""}).ok());
  auto scores = c.Prioritize(Share(40, 100), {"a", "b", "c"});
  ASSERT_EQ(scores.size(), 3u);
  int64_t best = -1;
  for (const auto& [name, s] : scores) {
    EXPECT_GE(s, 0);
    EXPECT_LE(s, 10);
    best = std::max(best, s);
  }
  EXPECT_EQ(best, 10);
  // Filling b's half GPU exactly strands nothing; it must be the (or a) top choice.
  EXPECT_EQ(scores[1].first, "b");
  EXPECT_EQ(scores[1].second, 10);
  // A pod without GPUs: a node without GPUs (or unknown) first, then the least free GPU.
  c.UpsertNode({.name = "cpu", .gpus = 0, .model = "", .gpu_memory_bytes = 0});
  auto cpu_only = c.Prioritize(GpuRequest{}, {"a", "b", "cpu", "ghost"});
  ASSERT_EQ(cpu_only.size(), 4u);
  EXPECT_EQ(cpu_only[0].second, 0);   // a: one whole GPU free
  EXPECT_EQ(cpu_only[1].second, 5);   // b: half a GPU free
  EXPECT_EQ(cpu_only[2].second, 10);  // no GPUs
  EXPECT_EQ(cpu_only[3].second, 10);  // not a node the extender knows: no GPUs it tracks
}

TEST(OnlineCluster, RestoreRejectsConflictsAndBadAssignments) {
  OnlineCluster c(MakeTesseraPolicy());
  c.UpsertNode(H100("a", 2));
  EXPECT_TRUE(c.Restore("p1", {.node = "a", .gpus = {1}, .milli_per_gpu = 700, .user = ""}).ok());
  EXPECT_FALSE(c.Restore("p2", {.node = "a", .gpus = {1}, .milli_per_gpu = 400, .user = ""}).ok());
  EXPECT_FALSE(c.Restore("p3", {.node = "a", .gpus = {2}, .milli_per_gpu = 100, .user = ""}).ok());
  EXPECT_FALSE(
      c.Restore("p4", {.node = "a", .gpus = {0, 0}, .milli_per_gpu = 1000, .user = ""}).ok());
  EXPECT_FALSE(
      c.Restore("p5", {.node = "a", .gpus = {0, 1}, .milli_per_gpu = 300, .user = ""}).ok());
  EXPECT_FALSE(c.Restore("p6", {.node = "zz", .gpus = {0}, .milli_per_gpu = 100, .user = ""}).ok());
  EXPECT_EQ(c.used_milli(), 700);
}

TEST(OnlineCluster, ResyncReleasesLeaversKeepsRecentReservations) {
  OnlineCluster c(MakeTesseraPolicy());
  c.UpsertNode(H100("a", 4));
  ASSERT_TRUE(c.Restore("old", {.node = "a", .gpus = {0}, .milli_per_gpu = 1000, .user = ""}).ok());
  uint64_t list_started = c.generation();
  ASSERT_TRUE(c.Reserve("fresh", Whole(1), "a").ok());  // bound while the list was in flight
  std::map<std::string, Assignment> live = {
      {"other", {.node = "a", .gpus = {3}, .milli_per_gpu = 200, .user = ""}}};
  OnlineCluster::ResyncResult r = c.Resync(live, list_started);
  EXPECT_EQ(r.released, 1);  // "old" left
  EXPECT_EQ(r.restored, 1);  // "other" bound by someone else
  EXPECT_EQ(c.Find("old"), nullptr);
  EXPECT_NE(c.Find("fresh"), nullptr);
  EXPECT_NE(c.Find("other"), nullptr);
  EXPECT_EQ(c.used_milli(), 1200);
}

TEST(OnlineCluster, NodeChangeKeepsPodsThatStillFit) {
  OnlineCluster c(MakeTesseraPolicy());
  c.UpsertNode(H100("a", 4));
  ASSERT_TRUE(c.Restore("p0", {.node = "a", .gpus = {0}, .milli_per_gpu = 500, .user = ""}).ok());
  ASSERT_TRUE(c.Restore("p3", {.node = "a", .gpus = {3}, .milli_per_gpu = 500, .user = ""}).ok());
  std::vector<std::string> dropped = c.UpsertNode(H100("a", 2));  // two GPUs went away
  EXPECT_EQ(dropped, std::vector<std::string>{"p3"});
  EXPECT_EQ(c.total_milli(), 2000);
  EXPECT_EQ(c.used_milli(), 500);
  EXPECT_TRUE(c.UpsertNode(H100("a", 2)).empty());  // unchanged: nothing happens
}

// Nodes that left the cluster (scaled down, replaced) are forgotten with their pods, unless a
// pod still names them or they were added after the list was asked for.
TEST(OnlineCluster, RemovesNodesThatLeft) {
  OnlineCluster c(MakeTesseraPolicy());
  c.UpsertNode(H100("a", 4));
  c.UpsertNode(H100("b", 2));
  c.UpsertNode(H100("c", 2));
  ASSERT_TRUE(c.Restore("on-a", {.node = "a", .gpus = {1}, .milli_per_gpu = 300, .user = ""}).ok());
  ASSERT_TRUE(
      c.Restore("on-b", {.node = "b", .gpus = {0}, .milli_per_gpu = 1000, .user = ""}).ok());
  uint64_t list_started = c.generation();
  c.UpsertNode(H100("new", 8));  // joined while the list was in flight: not in it
  EXPECT_TRUE(c.RemoveNodesExcept({"a", "b", "c"}, list_started).empty());
  EXPECT_EQ(c.num_nodes(), 4);
  std::vector<std::string> dropped = c.RemoveNodesExcept({"a", "c"}, list_started);
  EXPECT_EQ(dropped, std::vector<std::string>{"on-b"});
  EXPECT_EQ(c.num_nodes(), 3);
  EXPECT_FALSE(c.HasNode("b"));
  EXPECT_TRUE(c.HasNode("new"));
  EXPECT_EQ(c.total_milli(), (4 + 2 + 8) * kGpuMilli);
  EXPECT_EQ(c.used_milli(), 300);
  EXPECT_EQ(c.Find("on-b"), nullptr);
  // The remaining nodes are still addressed by name: a reservation lands where it is asked.
  absl::StatusOr<Assignment> on_new = c.Reserve("x", Whole(8), "new");
  ASSERT_TRUE(on_new.ok()) << on_new.status();
  EXPECT_EQ(on_new->gpus.size(), 8u);
  EXPECT_FALSE(c.Reserve("y", Whole(1), "b").ok());
  EXPECT_EQ(c.used_milli(), 8300);
  // Once a later list has run, "new" is gone too when it is not in it.
  EXPECT_EQ(c.RemoveNodesExcept({"a"}, c.generation()), (std::vector<std::string>{"x"}));
  EXPECT_EQ(c.total_milli(), 4 * kGpuMilli);
}

// One node forgotten (the watch saw it deleted): one that holds nothing goes without the others
// being rebuilt, and every node after it is still addressed by name; one that holds pods drops
// them, as a list that no longer shows it does.
TEST(OnlineCluster, RemovesOneNode) {
  OnlineCluster c(MakeTesseraPolicy());
  for (const char* name : {"a", "b", "c", "d"}) c.UpsertNode(H100(name, 2));
  ASSERT_TRUE(c.Restore("on-a", {.node = "a", .gpus = {1}, .milli_per_gpu = 300, .user = ""}).ok());
  ASSERT_TRUE(
      c.Restore("on-c", {.node = "c", .gpus = {0}, .milli_per_gpu = 1000, .user = ""}).ok());
  ASSERT_TRUE(c.Restore("on-d", {.node = "d", .gpus = {1}, .milli_per_gpu = 700, .user = ""}).ok());
  EXPECT_TRUE(c.RemoveNode("b").empty());
  EXPECT_TRUE(c.RemoveNode("b").empty());  // unknown now: nothing
  EXPECT_FALSE(c.HasNode("b"));
  EXPECT_EQ(c.num_nodes(), 3);
  EXPECT_EQ(c.total_milli(), 6 * kGpuMilli);
  EXPECT_EQ(c.used_milli(), 2000);
  // c and d moved down one place and kept what they hold: c's GPU 0 is full, d's GPU 1 has 300.
  EXPECT_FALSE(c.Reserve("x", Whole(2), "c").ok());
  absl::StatusOr<Assignment> whole = c.Reserve("z", Whole(1), "d");
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->gpus, std::vector<int>{0});
  absl::StatusOr<Assignment> share = c.Reserve("y", Share(8, 300), "d");
  ASSERT_TRUE(share.ok()) << share.status();
  EXPECT_EQ(share->gpus, std::vector<int>{1});
  EXPECT_FALSE(c.Reserve("w", Share(8, 100), "d").ok());
  EXPECT_EQ(c.RemoveNode("c"), std::vector<std::string>{"on-c"});
  EXPECT_EQ(c.total_milli(), 4 * kGpuMilli);
  EXPECT_EQ(c.used_milli(), 300 + 700 + 300 + 1000);
  EXPECT_NE(c.Find("on-a"), nullptr);
  EXPECT_EQ(c.Find("on-c"), nullptr);
}

// Preemption: every lower-priority GPU holder goes, then each is given back while the pod still
// fits, the most important (highest priority, earliest started) first; kube-scheduler's own victims
// kept and counted as freeing their GPUs; nodes where no eviction helps left out.
TEST(OnlineCluster, PreemptionVictimsFreeTheGpuTheShareNeeds) {
  OnlineCluster c(MakeTesseraPolicy());
  c.UpsertNode(H100("n", 2));
  c.UpsertNode({.name = "cpu", .gpus = 0, .model = "", .gpu_memory_bytes = 0});
  ASSERT_TRUE(c.Restore("a", {.node = "n", .gpus = {0}, .milli_per_gpu = 600, .user = ""}).ok());
  ASSERT_TRUE(c.Restore("b", {.node = "n", .gpus = {1}, .milli_per_gpu = 600, .user = ""}).ok());
  ASSERT_TRUE(c.Restore("c", {.node = "n", .gpus = {0}, .milli_per_gpu = 300, .user = ""}).ok());
  const absl::Time t0 = absl::FromUnixSeconds(1764800000);
  c.SetImportance("a", 0, t0);
  c.SetImportance("b", 100, t0);
  c.SetImportance("c", 0, t0 + absl::Minutes(5));  // started after a
  c.SetImportance("ghost", 5);                     // holds nothing: ignored
  using Victims = std::map<std::string, std::vector<std::string>>;
  const GpuRequest share700 = Share(8, 700);
  // GPU 0 has 100 free, GPU 1 400: a and c go; a (started earlier) is given back first, but
  // then the share has no room; c can be given back beside it.
  EXPECT_EQ(c.PreemptionVictims(share700, 50, {{"n", {}}}), (Victims{{"n", {"a"}}}));
  // A whole GPU needs both of GPU 0's pods.
  EXPECT_EQ(c.PreemptionVictims(Whole(1), 50, {{"n", {}}}), (Victims{{"n", {"c", "a"}}}));
  // Two whole GPUs would need b, which outranks the pod: no room, the node is left out.
  EXPECT_EQ(c.PreemptionVictims(Whole(2), 50, {{"n", {}}}), Victims{});
  EXPECT_EQ(c.PreemptionVictims(Whole(2), 101, {{"n", {}}}), (Victims{{"n", {"c", "a", "b"}}}));
  // No pod of lower priority: nothing to take.
  EXPECT_EQ(c.PreemptionVictims(share700, 0, {{"n", {}}}), Victims{});
  // kube-scheduler's own victim (here b, evicted for its CPU) frees GPU 1: nothing added.
  EXPECT_EQ(c.PreemptionVictims(share700, 50, {{"n", {"b"}}}), (Victims{{"n", {"b"}}}));
  // A share that fits already, with no victim of kube-scheduler's: left out (it is placed on
  // its next attempt; kube-scheduler refuses a candidate without victims).
  EXPECT_EQ(c.PreemptionVictims(Share(8, 300), 50, {{"n", {}}}), Victims{});
  // Nodes that can never hold it (no GPUs, unknown) are left out.
  EXPECT_EQ(c.PreemptionVictims(share700, 50, {{"cpu", {"x"}}, {"ghost", {}}}), Victims{});
  // A pod that asks for no GPU: kube-scheduler's choice stands.
  EXPECT_EQ(c.PreemptionVictims(GpuRequest{}, 50, {{"cpu", {"x"}}}), (Victims{{"cpu", {"x"}}}));
  // Among equal priorities the latest started goes first, as kube-scheduler orders victims; a
  // pod not started yet counts as the latest; then the order does not depend on the holding.
  c.UpsertNode(H100("m", 2));
  ASSERT_TRUE(c.Restore("y", {.node = "m", .gpus = {1}, .milli_per_gpu = 900, .user = ""}).ok());
  ASSERT_TRUE(c.Restore("x", {.node = "m", .gpus = {0}, .milli_per_gpu = 900, .user = ""}).ok());
  const GpuRequest share500 = Share(8, 500);
  EXPECT_EQ(c.PreemptionVictims(share500, 50, {{"m", {}}}), (Victims{{"m", {"y"}}}));
  c.SetImportance("x", 0, t0 + absl::Minutes(1));
  c.SetImportance("y", 0, t0);
  EXPECT_EQ(c.PreemptionVictims(share500, 50, {{"m", {}}}), (Victims{{"m", {"x"}}}));
  c.SetImportance("y", 0);  // not started
  EXPECT_EQ(c.PreemptionVictims(share500, 50, {{"m", {}}}), (Victims{{"m", {"y"}}}));
  // Nothing was released by asking.
  EXPECT_EQ(c.pods(), 5);
  EXPECT_EQ(c.used_milli(), 3300);
  // A node change rebuilds the state (here a node that left the cluster); the pods keep their
  // priorities and start times. They were reset before: b, at 0 again, became a victim of a
  // pod of priority 50.
  c.UpsertNode(H100("gone", 1));
  ASSERT_EQ(c.RemoveNodesExcept({"n", "m", "cpu"}, c.generation()), std::vector<std::string>{});
  EXPECT_EQ(c.PreemptionVictims(Whole(2), 50, {{"n", {}}}), Victims{});
  EXPECT_EQ(c.PreemptionVictims(share500, 50, {{"m", {}}}), (Victims{{"m", {"y"}}}));
  c.SetImportance("y", 0, t0);
  c.UpsertNode(H100("m", 3));  // a GPU more: rebuilt again
  EXPECT_EQ(c.PreemptionVictims(Whole(3), 50, {{"m", {}}}), (Victims{{"m", {"x", "y"}}}));
  EXPECT_EQ(c.PreemptionVictims(share500, 50, {{"m", {}}}), Victims{});  // GPU 2 is free
  c.UpsertNode(H100("m", 2));
  EXPECT_EQ(c.PreemptionVictims(share500, 50, {{"m", {}}}), (Victims{{"m", {"x"}}}));
}

// A pod nominated to a node after a preemption keeps the GPU room it waits for from pods of
// lower or equal priority (Filter, Reserve, and other preemptions), and only that room.
// The extender's own preemption (for pods only GPU share keeps out) picks among candidate nodes
// as kube-scheduler's pickOneNodeForPreemption does, each rule breaking the previous one's ties.
TEST(OnlineCluster, PicksThePreemptionNodeAsKubeSchedulerDoes) {
  OnlineCluster c(MakeTesseraPolicy());
  const absl::Time t0 = absl::FromUnixSeconds(1764800000);
  // Pods p<i> on node n<i>, one per GPU of an 8-GPU H100 node.
  auto pod = [&](const std::string& uid, const std::string& node, int gpu, int32_t priority,
                 absl::Time started) {
    if (!c.HasNode(node)) c.UpsertNode(H100(node, 8));
    ASSERT_TRUE(
        c.Restore(uid, {.node = node, .gpus = {gpu}, .milli_per_gpu = 500, .user = ""}).ok());
    c.SetImportance(uid, priority, started);
  };
  pod("a1", "a", 0, 10, t0);
  pod("b1", "b", 0, 5, t0);
  pod("b2", "b", 1, 5, t0);
  pod("c1", "c", 0, 5, t0);
  pod("d1", "d", 0, -100, t0);
  pod("d2", "d", 1, -100, t0);
  pod("e1", "e", 0, -100, t0 + absl::Minutes(1));
  pod("e2", "e", 1, -100, t0 + absl::Minutes(1));
  using Victims = std::map<std::string, std::vector<std::string>>;
  const Victims all = {
      {"a", {"a1"}}, {"b", {"b1", "b2"}}, {"c", {"c1"}}, {"d", {"d1", "d2"}}, {"e", {"e1", "e2"}}};
  // The fewest budget violations first.
  EXPECT_EQ(c.PickPreemptionNode(all, {{"d", 1}, {"e", 1}}), "c");
  // Then the lowest highest priority: d and e (-100); their sums tie (two pods each), so do
  // their counts; e's victims started later.
  EXPECT_EQ(c.PickPreemptionNode(all, {}), "e");
  // The lowest sum of priorities: c (one pod of 5) before b (two).
  EXPECT_EQ(c.PickPreemptionNode({{"b", {"b1", "b2"}}, {"c", {"c1"}}, {"a", {"a1"}}}, {}), "c");
  // A sum with negative priorities counts each victim (one of -100 beats two of -100).
  pod("f1", "f", 0, -100, t0);
  EXPECT_EQ(c.PickPreemptionNode({{"d", {"d1", "d2"}}, {"f", {"f1"}}}, {}), "f");
  // A victim not started yet counts as the latest started.
  pod("g1", "g", 0, -100, absl::InfiniteFuture());
  EXPECT_EQ(c.PickPreemptionNode({{"f", {"f1"}}, {"g", {"g1"}}}, {}), "g");
  // The start compared is that of the highest-priority victims: h's lower-priority victim
  // started long before, but its priority-5 victim started after i's.
  pod("h1", "h", 0, 5, t0 + absl::Minutes(3));
  pod("h2", "h", 1, -200, t0 - absl::Hours(1));
  pod("i1", "i", 0, 5, t0 + absl::Minutes(2));
  pod("i2", "i", 1, -200, t0 + absl::Minutes(9));
  EXPECT_EQ(c.PickPreemptionNode({{"h", {"h1", "h2"}}, {"i", {"i1", "i2"}}}, {}), "h");
  // Full ties: the first by name; nothing to choose from: "".
  EXPECT_EQ(c.PickPreemptionNode({{"d", {"d1", "d2"}}, {"z", {}}}, {}), "d");
  EXPECT_EQ(c.PickPreemptionNode({}, {}), "");

  // Ending pods below a priority on a node (a preemption in progress there).
  EXPECT_FALSE(c.EndingBelow("b", 10));
  c.SetImportance("b1", 5, t0, /*ending=*/true);
  EXPECT_TRUE(c.EndingBelow("b", 10));
  EXPECT_FALSE(c.EndingBelow("b", 5));   // not below
  EXPECT_FALSE(c.EndingBelow("a", 10));  // another node
  c.Release("b1");
  EXPECT_FALSE(c.EndingBelow("b", 10));
}

TEST(OnlineCluster, NominatedPodsKeepTheRoomTheyWaitFor) {
  OnlineCluster c(MakeTesseraPolicy());
  c.UpsertNode(H100("n", 2));
  using Victims = std::map<std::string, std::vector<std::string>>;
  const absl::Time t0 = absl::FromUnixSeconds(1764800000);
  // GPU 0 held whole by `old`, GPU 1 by `young` (started later); both priority 0.
  ASSERT_TRUE(c.Restore("old", {.node = "n", .gpus = {0}, .milli_per_gpu = 1000, .user = ""}).ok());
  ASSERT_TRUE(
      c.Restore("young", {.node = "n", .gpus = {1}, .milli_per_gpu = 500, .user = ""}).ok());
  c.SetImportance("old", 0, t0);
  c.SetImportance("young", 0, t0 + absl::Minutes(1));
  // `q` (priority 1000, a whole GPU) preempted `old`, which is ending, and waits on n.
  c.SetImportance("old", 0, t0, /*ending=*/true);
  c.Nominate("q", "ns/q", Whole(1), 1000, "n");
  EXPECT_EQ(c.nominated(), 1);
  // While `old` ends, GPU 1's free 500 is not what q waits for: usable at any priority.
  EXPECT_EQ(c.Filter(Share(8, 400), {"n"}, "p", 0).fit, std::vector<std::string>{"n"});
  c.Release("old");  // ended
  // GPU 0 is free now, and kept for q from pods of priority <= 1000 other than q.
  FilterOutcome f = c.Filter(Whole(1), {"n"}, "p", 0);
  EXPECT_TRUE(f.fit.empty());
  EXPECT_EQ(f.failed["n"], "the GPU room left is kept for the pods nominated to this node (ns/q)");
  EXPECT_TRUE(c.Filter(Whole(1), {"n"}, "p", 1000).fit.empty());
  EXPECT_EQ(c.Filter(Whole(1), {"n"}, "p", 1001).fit.size(), 1u);
  EXPECT_EQ(c.Filter(Whole(1), {"n"}, "q", 1000).fit.size(), 1u);
  EXPECT_EQ(c.Filter(Share(8, 500), {"n"}, "p", 0).fit.size(), 1u);  // GPU 1's half
  EXPECT_FALSE(c.Reserve("p", Whole(1), "n", 0).ok());
  // A share that would fit either GPU is placed where q's room is not (without the nomination
  // the policy takes GPU 0, checked on a second cluster below).
  absl::StatusOr<Assignment> a = c.Reserve("p", Share(8, 300), "n", 0);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->gpus, std::vector<int>{1});
  {
    OnlineCluster free(MakeTesseraPolicy());
    free.UpsertNode(H100("n", 2));
    ASSERT_TRUE(
        free.Restore("young", {.node = "n", .gpus = {1}, .milli_per_gpu = 500, .user = ""}).ok());
    EXPECT_EQ(free.Reserve("p", Share(8, 300), "n", 0)->gpus, std::vector<int>{0});
  }
  c.Release("p");
  // Another preemption, by r of priority 500 for a whole GPU: GPU 0 is q's, so r must evict
  // `young`; r of priority 2000 outranks q and takes nothing (GPU 0 is free for it).
  EXPECT_EQ(c.PreemptionVictims(Whole(1), 500, {{"n", {}}}, "r"), (Victims{{"n", {"young"}}}));
  EXPECT_EQ(c.PreemptionVictims(Whole(1), 2000, {{"n", {}}}, "r"), Victims{});
  // A nominated pod that has no room even once every ending pod is gone keeps the node from
  // the pods it outranks, as kube-scheduler does for CPU and memory.
  c.Nominate("q2", "ns/q2", Whole(2), 1000, "n");
  f = c.Filter(Share(8, 100), {"n"}, "p", 0);
  EXPECT_EQ(f.failed["n"], "pod ns/q2 is nominated to this node and waits for GPU room here");
  c.ClearNomination("q2");
  // Bound, q is nominated no more; a pod without GPUs, or nominated to no node, is not kept.
  ASSERT_TRUE(c.Reserve("q", Whole(1), "n", 1000).ok());
  EXPECT_EQ(c.nominated(), 0);
  c.Nominate("cpu-only", "ns/cpu-only", GpuRequest{}, 1000, "n");
  c.Nominate("q", "ns/q", Whole(1), 1000, "n");  // held already
  EXPECT_EQ(c.nominated(), 0);
  c.Nominate("s", "ns/s", Share(8, 200), 1000, "n");
  c.Nominate("s", "ns/s", Share(8, 200), 1000, "elsewhere");  // moved
  EXPECT_EQ(c.Filter(Share(8, 500), {"n"}, "p", 0).fit.size(), 1u);
  // The nominations a preemption on a node clears: those of lower priority there.
  c.Nominate("t", "ns/t", Share(8, 200), 10, "n");
  c.Nominate("u", "ns/u", Share(8, 200), 999, "n");
  EXPECT_EQ(c.NominatedBelow("n", 1000),
            (std::map<std::string, std::string>{{"t", "ns/t"}, {"u", "ns/u"}}));
  EXPECT_EQ(c.NominatedBelow("n", 999), (std::map<std::string, std::string>{{"t", "ns/t"}}));
  EXPECT_TRUE(c.NominatedBelow("n", 10).empty());
  EXPECT_TRUE(c.NominatedBelow("nowhere", 2000).empty());
  EXPECT_EQ(c.NominatedBelow("elsewhere", 1001).size(), 1u);  // s
  c.ClearNominations();
  EXPECT_EQ(c.nominated(), 0);
}

// PodDisruptionBudgets, as kube-scheduler weighs them: candidates whose eviction would violate
// one are spared first; kube-scheduler's own victims use what a budget allows before them.
TEST(OnlineCluster, PreemptionSparesWhatBudgetsProtectFirst) {
  OnlineCluster c(MakeTesseraPolicy());
  c.UpsertNode(H100("n", 2));
  const absl::Time t0 = absl::FromUnixSeconds(1764800000);
  ASSERT_TRUE(c.Restore("a", {.node = "n", .gpus = {0}, .milli_per_gpu = 600, .user = ""}).ok());
  ASSERT_TRUE(c.Restore("b", {.node = "n", .gpus = {1}, .milli_per_gpu = 600, .user = ""}).ok());
  ASSERT_TRUE(c.Restore("c", {.node = "n", .gpus = {0}, .milli_per_gpu = 300, .user = ""}).ok());
  c.SetImportance("a", 0, t0);
  c.SetImportance("b", 0, t0 + absl::Minutes(1));
  c.SetImportance("c", 0, t0 + absl::Minutes(5));
  using Victims = std::map<std::string, std::vector<std::string>>;
  const GpuRequest share700 = Share(8, 700);
  std::map<std::string, int64_t> violations;
  // No budgets: a, the most important, is spared first; then b cannot be.
  EXPECT_EQ(c.PreemptionVictims(share700, 50, {{"n", {}}}, "p", nullptr, &violations),
            (Victims{{"n", {"b"}}}));
  EXPECT_EQ(violations["n"], 0);
  // b's budget allows no disruption: b is spared first, a taken instead (c then fits beside).
  DisruptionBudgets budgets;
  budgets.allowed = {0};
  budgets.of = [](const std::string& uid) {
    return uid == "b" ? std::vector<int>{0} : std::vector<int>{};
  };
  EXPECT_EQ(c.PreemptionVictims(share700, 50, {{"n", {}}}, "p", &budgets, &violations),
            (Victims{{"n", {"a"}}}));
  EXPECT_EQ(violations["n"], 0);
  // One budget over a, b and kube-scheduler's victim `cpu`, allowing one disruption: `cpu` uses
  // it, so a and b would both violate; a is spared first and b's eviction is a violation.
  budgets.allowed = {1};
  budgets.of = [](const std::string& uid) {
    return uid == "c" ? std::vector<int>{} : std::vector<int>{0};
  };
  EXPECT_EQ(c.PreemptionVictims(share700, 50, {{"n", {"cpu"}}}, "p", &budgets, &violations),
            (Victims{{"n", {"cpu", "b"}}}));
  EXPECT_EQ(violations["n"], 1);
}

GpuRequest OfUser(GpuRequest req, const std::string& user) {
  req.user = user;
  return req;
}

// Under MPS a GPU serves one user's pods at a time: a pod of another user goes to a GPU no other
// user shares, its placement is chosen among those, preemption counts the other users' pods as
// in its way, and a rebuilt state keeps the users.
TEST(OnlineCluster, KeepsEachGpuToOneUsersPods) {
  using Victims = std::map<std::string, std::vector<std::string>>;
  OnlineCluster c(MakeTesseraPolicy());
  c.UpsertNode(H100("n", 2));
  ASSERT_TRUE(
      c.Restore("root-a", {.node = "n", .gpus = {0}, .milli_per_gpu = 300, .user = "0"}).ok());
  // GPU 0 has room, but its pods run as root.
  absl::StatusOr<Assignment> triton = c.Reserve("triton-a", OfUser(Share(8, 300), "1000"), "n");
  ASSERT_TRUE(triton.ok()) << triton.status();
  EXPECT_EQ(triton->gpus, std::vector<int>{1});
  EXPECT_EQ(triton->user, "1000");
  absl::StatusOr<Assignment> root = c.Reserve("root-b", OfUser(Share(8, 300), "0"), "n");
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->gpus, std::vector<int>{0});
  // A third user finds both GPUs taken by others; a pod without a user is not held to the rule.
  FilterOutcome third = c.Filter(OfUser(Share(8, 300), "2000"), {"n"});
  EXPECT_TRUE(third.fit.empty());
  EXPECT_EQ(third.failed["n"],
            "the GPUs with 300 milli-GPU free are shared by pods of another user (0, 1000), and "
            "MPS serves one user's pods per GPU at a time");
  EXPECT_EQ(c.Filter(Share(8, 300), {"n"}).fit, std::vector<std::string>{"n"});
  // Root's GPU has 400 free: 500 fits only on GPU 1, which is not root's.
  EXPECT_THAT(c.Filter(OfUser(Share(8, 500), "0"), {"n"}).failed["n"],
              ::testing::HasSubstr("another user (1000)"));
  EXPECT_EQ(c.Filter(OfUser(Share(8, 500), "1000"), {"n"}).fit, std::vector<std::string>{"n"});
  EXPECT_FALSE(c.Reserve("root-c", OfUser(Share(8, 500), "0"), "n").ok());
  // Preemption: the third user's pod needs GPU 1 for itself, though its share has room there.
  c.SetImportance("root-a", 1000);
  c.SetImportance("root-b", 1000);
  EXPECT_EQ(c.PreemptionVictims(OfUser(Share(8, 300), "2000"), 100, {{"n", {}}}),
            (Victims{{"n", {"triton-a"}}}));
  EXPECT_EQ(c.PreemptionVictims(Share(8, 300), 100, {{"n", {}}}), Victims{});
  EXPECT_EQ(c.PreemptionVictims(OfUser(Share(8, 300), "2000"), 500, {{"n", {}}}).size(), 1u);
  // A rebuilt state (a node left) holds the users again.
  c.UpsertNode(H100("gone", 1));
  ASSERT_EQ(c.RemoveNodesExcept({"n"}, c.generation()), std::vector<std::string>{});
  EXPECT_EQ(c.Find("root-b")->user, "0");
  EXPECT_EQ(c.Filter(OfUser(Share(8, 300), "2000"), {"n"}).fit, std::vector<std::string>{});
  // Once Triton's pod is gone, GPU 1 is open to anyone.
  c.Release("triton-a");
  absl::StatusOr<Assignment> other = c.Reserve("other", OfUser(Share(8, 300), "2000"), "n");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->gpus, std::vector<int>{1});
  // No GPU has two users; one placed outside the rule (restored as bound) is reported.
  EXPECT_TRUE(c.MixedUserGpus().empty());
  ASSERT_TRUE(
      c.Restore("bound", {.node = "n", .gpus = {1}, .milli_per_gpu = 100, .user = "3000"}).ok());
  std::vector<OnlineCluster::MixedUserGpu> mixed = c.MixedUserGpus();
  ASSERT_EQ(mixed.size(), 1u);
  EXPECT_EQ(mixed[0].node, "n");
  EXPECT_EQ(mixed[0].gpu, 1);
  EXPECT_EQ(mixed[0].users, (std::vector<std::string>{"2000", "3000"}));
  EXPECT_EQ(mixed[0].pods, (std::vector<std::string>{"bound", "other"}));
  c.Release("bound");
  EXPECT_TRUE(c.MixedUserGpus().empty());
  // Whole GPUs carry no user.
  c.Release("other");
  absl::StatusOr<Assignment> whole = c.Reserve("whole", OfUser(Whole(1), "0"), "n");
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->user, "");
}

// A pod nominated to a node under MPS waits for room on a GPU of its own user: pods of other
// users are kept off that GPU meanwhile, as they are kept off its share.
TEST(OnlineCluster, NominatedPodsKeepTheirGpuFromOtherUsers) {
  OnlineCluster c(MakeTesseraPolicy());
  c.UpsertNode(H100("n", 2));
  ASSERT_TRUE(
      c.Restore("root", {.node = "n", .gpus = {0}, .milli_per_gpu = 300, .user = "0"}).ok());
  // Triton's pod (user 1000) preempted for room here; GPU 0 is root's, so it waits for GPU 1.
  c.Nominate("triton", "ns/triton", OfUser(Share(8, 300), "1000"), 100, "n");
  FilterOutcome third = c.Filter(OfUser(Share(8, 300), "2000"), {"n"}, "other", 0);
  EXPECT_TRUE(third.fit.empty());
  EXPECT_THAT(third.failed["n"], ::testing::HasSubstr("another user"));
  EXPECT_FALSE(c.Reserve("other", OfUser(Share(8, 300), "2000"), "n", 0).ok());
  // Triton's own user may share GPU 1 beside it, and root may use GPU 0.
  absl::StatusOr<Assignment> same = c.Reserve("triton-2", OfUser(Share(8, 300), "1000"), "n", 0);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->gpus, std::vector<int>{1});
  absl::StatusOr<Assignment> root = c.Reserve("root-2", OfUser(Share(8, 300), "0"), "n", 0);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->gpus, std::vector<int>{0});
  // Then the nominated pod is placed where it waited.
  absl::StatusOr<Assignment> triton = c.Reserve("triton", OfUser(Share(8, 300), "1000"), "n", 100);
  ASSERT_TRUE(triton.ok()) << triton.status();
  EXPECT_EQ(triton->gpus, std::vector<int>{1});
  // A nominated pod of a third user has no GPU left that is not another user's: it blocks the
  // node for pods of lower priority, as a nominated pod that cannot fit does.
  c.Release("root");
  c.Release("root-2");
  c.Nominate("late", "ns/late", OfUser(Share(8, 300), "3000"), 100, "n");
  c.Nominate("later", "ns/later", OfUser(Share(8, 300), "4000"), 100, "n");
  EXPECT_EQ(c.Filter(Share(8, 100), {"n"}, "x", 0).failed["n"],
            "pod ns/later is nominated to this node and waits for GPU room here");
  // The view a person reads: free share and holders per GPU, the nominated pods.
  std::vector<OnlineCluster::NodeView> view = c.View("n");
  ASSERT_EQ(view.size(), 1u);
  EXPECT_EQ(view[0].free_milli, (std::vector<int64_t>{1000, 400}));
  ASSERT_EQ(view[0].holders[1].size(), 2u);
  EXPECT_EQ(view[0].holders[1][0].uid, "triton");
  EXPECT_EQ(view[0].holders[1][0].user, "1000");
  EXPECT_EQ(view[0].holders[1][0].priority, 0);  // not told otherwise (SetImportance)
  EXPECT_TRUE(view[0].holders[0].empty());
  EXPECT_EQ(view[0].nominated,
            (std::vector<std::pair<std::string, int32_t>>{{"ns/late", 100}, {"ns/later", 100}}));
  EXPECT_TRUE(c.View("zz").empty());
  EXPECT_EQ(c.View().size(), 1u);
}

}  // namespace
}  // namespace tessera::placement::gpushare
