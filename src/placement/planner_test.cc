#include "placement/planner.h"

#include "base/units.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/plan_validator.h"
#include "placement/test_fleets.h"

namespace tessera::placement {
namespace {

using model::Isolation;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::MakePool;
using testing::MakeWorkload;

Plan PlanAndValidate(const model::Fleet& fleet, const model::WorkloadSet& set,
                     const PlannerOptions& options = {}) {
  Plan plan = MakePlan(fleet, set, options);
  std::vector<std::string> errors = ValidatePlan(fleet, set, plan, options);
  EXPECT_THAT(errors, IsEmpty());
  return plan;
}

TEST(Planner, SmallReplicasShareGpus) {
  model::Fleet fleet{{MakePool("h100", "H100-80GB", 8, 4, 16)}};
  // 8 replicas of 18Gi / 0.2: MPS-4 slots (19.9 GiB, 0.25) hold them four to a GPU.
  model::WorkloadSet set{{MakeWorkload("chat-small", 8, 18 * kGiB, 200, Isolation::kMemory)}};
  Plan plan = PlanAndValidate(fleet, set);
  EXPECT_EQ(plan.totals.gpus_before, 8);
  EXPECT_EQ(plan.totals.gpus_after, 2);
  EXPECT_EQ(plan.totals.lower_bound_gpus, 2);
  EXPECT_EQ(plan.placements[0].shape.kind, ShapeKind::kMps);
  EXPECT_EQ(plan.placements[0].shape.slots, 4);
  EXPECT_EQ(plan.placements[0].resource, "nvidia.com/gpu.shared");
  EXPECT_EQ(plan.totals.nodes_after, 2);  // spread over two nodes
  EXPECT_LT(plan.totals.cost_per_month_after, plan.totals.cost_per_month_before);
}

TEST(Planner, FullIsolationUsesMigOnly) {
  model::Fleet fleet{{MakePool("a100", "A100-80GB", 8, 2, 4)}};
  model::WorkloadSet set{{MakeWorkload("secure", 4, 30 * kGiB, 300, Isolation::kFull),
                          MakeWorkload("tiny", 4, 8 * kGiB, 100, Isolation::kFull)}};
  Plan plan = PlanAndValidate(fleet, set);
  EXPECT_EQ(plan.placements[0].shape.kind, ShapeKind::kMig);
  EXPECT_EQ(plan.placements[0].resource, "nvidia.com/mig-3g.40gb");
  EXPECT_EQ(plan.placements[1].resource, "nvidia.com/mig-1g.10gb");
  // 4x 3g + 4x 1g: 3g+3g fills a GPU's memory, so 3 GPUs (3g+3g, 3g+3g, 4x 1g) is the slice
  // bound. Spreading "tiny" over two nodes costs one more GPU with the packer's layouts.
  EXPECT_EQ(plan.totals.lower_bound_gpus, 3);
  EXPECT_LE(plan.totals.gpus_after, 4);
  fleet.pools[0].max_nodes = 1;
  fleet.pools[0].nodes = 1;
  Plan one_node = PlanAndValidate(fleet, set);
  EXPECT_EQ(one_node.totals.gpus_after, 3);
  for (const NodePlan& n : plan.pools[0].nodes) {
    EXPECT_EQ(n.sharing, NodeSharing::kNone);
  }
}

TEST(Planner, NonMigPoolFallsBackToExclusiveForFullIsolation) {
  model::Fleet fleet{{MakePool("l4", "L4", 4, 2, 4)}};
  model::WorkloadSet set{{MakeWorkload("secure", 3, 5 * kGiB, 100, Isolation::kFull)}};
  Plan plan = PlanAndValidate(fleet, set);
  EXPECT_EQ(plan.placements[0].shape.kind, ShapeKind::kExclusive);
  EXPECT_EQ(plan.totals.gpus_after, 3);
}

TEST(Planner, MultiGpuReplicasStayOnOneNode) {
  model::Fleet fleet{{MakePool("h100", "H100-80GB", 8, 2, 4)}};
  model::WorkloadSet set{{MakeWorkload("llama-70b", 3, 150 * kGiB, 2000, Isolation::kNone)}};
  Plan plan = PlanAndValidate(fleet, set);
  EXPECT_EQ(plan.totals.gpus_after, 6);
  EXPECT_EQ(plan.placements[0].resource_count, 2);
}

TEST(Planner, UnplaceableReportedWithReasonRestPlanned) {
  model::Fleet fleet{{MakePool("l4", "L4", 4, 1, 2)}};
  model::WorkloadSet set{
      {MakeWorkload("huge", 2, 60 * kGiB, 500), MakeWorkload("ok", 2, 4 * kGiB, 100)}};
  Plan plan = PlanAndValidate(fleet, set);
  ASSERT_EQ(plan.unplaceable.size(), 1u);
  EXPECT_EQ(plan.unplaceable[0].workload, 0);
  EXPECT_EQ(plan.unplaceable[0].replicas, 2);
  EXPECT_THAT(plan.unplaceable[0].reason, HasSubstr("needs 60.0 GiB but L4 has"));
  EXPECT_EQ(plan.placements[1].replicas_placed, 2);
}

TEST(Planner, CapacityLimitReportsTheRest) {
  model::Fleet fleet{{MakePool("t4", "T4", 2, 1, 1)}};
  model::WorkloadSet set{{MakeWorkload("big", 5, 10 * kGiB, 1000)}};
  Plan plan = PlanAndValidate(fleet, set);
  EXPECT_EQ(plan.placements[0].replicas_placed, 2);
  ASSERT_EQ(plan.unplaceable.size(), 1u);
  EXPECT_EQ(plan.unplaceable[0].replicas, 3);
  EXPECT_THAT(plan.unplaceable[0].reason, HasSubstr("capacity"));
}

TEST(Planner, AllowedModelsAndCheaperPool) {
  model::Fleet fleet{{MakePool("h100", "H100-80GB", 8, 1, 4), MakePool("l4", "L4", 4, 1, 4)}};
  model::Workload pinned = MakeWorkload("pinned", 2, 4 * kGiB, 100);
  pinned.allowed_models = {fleet.pools[0].gpu};
  model::WorkloadSet set{{pinned, MakeWorkload("free", 2, 10 * kGiB, 400)}};
  Plan plan = PlanAndValidate(fleet, set);
  EXPECT_EQ(plan.placements[0].pool, 0);
  // 10 GiB / 0.4 on L4 ($0.80, 2 per GPU) is cheaper than on H100 ($4, 2 per GPU).
  EXPECT_EQ(plan.placements[1].pool, 1);
}

TEST(Planner, TimeSlicingOversubscriptionIsExplicit) {
  model::Fleet fleet{{MakePool("l40s", "L40S", 4, 2, 4)}};
  model::WorkloadSet set{{MakeWorkload("bursty", 8, 4 * kGiB, 500, Isolation::kNone)}};
  Plan strict = PlanAndValidate(fleet, set);
  EXPECT_EQ(strict.totals.gpus_after, 4);  // compute 0.5 each: two per GPU
  PlannerOptions loose;
  loose.time_slicing_oversubscription = 2.0;
  Plan over = PlanAndValidate(fleet, set, loose);
  EXPECT_EQ(over.placements[0].shape.kind, ShapeKind::kTimeSlicing);
  EXPECT_EQ(over.totals.gpus_after, 2);
}

TEST(Planner, NodesShareOneSharingConfig) {
  model::Fleet fleet{{MakePool("h100", "H100-80GB", 4, 4, 8)}};
  model::WorkloadSet set{{MakeWorkload("a", 6, 18 * kGiB, 200, Isolation::kMemory),
                          MakeWorkload("b", 6, 9 * kGiB, 100, Isolation::kNone),
                          MakeWorkload("c", 2, 35 * kGiB, 400, Isolation::kFull)}};
  Plan plan = PlanAndValidate(fleet, set);
  for (const NodePlan& n : plan.pools[0].nodes) {
    for (const GpuPlan& g : n.gpus) {
      if (g.mode == GpuMode::kMps) {
        EXPECT_EQ(n.sharing, NodeSharing::kMps);
      }
      if (g.mode == GpuMode::kTimeSlicing) {
        EXPECT_EQ(n.sharing, NodeSharing::kTimeSlicing);
      }
      if (g.mode == GpuMode::kMig || g.mode == GpuMode::kExclusive) {
        EXPECT_EQ(n.sharing, NodeSharing::kNone);
      }
    }
  }
}

TEST(Planner, SingleNodePoolCannotSpreadAndSaysSo) {
  model::Fleet fleet{{MakePool("one", "H100-80GB", 8, 1, 1)}};
  model::WorkloadSet set{{MakeWorkload("a", 4, 10 * kGiB, 100)}};
  Plan plan = PlanAndValidate(fleet, set);
  EXPECT_EQ(plan.totals.nodes_after, 1);
  EXPECT_EQ(plan.totals.gpus_after, 1);
}

TEST(Planner, EmptyInputs) {
  model::Fleet fleet{{MakePool("h100", "H100-80GB", 8, 1, 2)}};
  Plan plan = PlanAndValidate(fleet, model::WorkloadSet{});
  EXPECT_EQ(plan.totals.gpus_after, 0);
  model::WorkloadSet set{{MakeWorkload("a", 2, kGiB, 100)}};
  Plan none = MakePlan(model::Fleet{}, set, {});
  ASSERT_EQ(none.unplaceable.size(), 1u);
  EXPECT_THAT(none.unplaceable[0].reason, HasSubstr("no pools"));
}

TEST(Planner, DeterministicAndValidOnRandomFleets) {
  Random rng(2024);
  for (int i = 0; i < 200; ++i) {
    model::Fleet fleet;
    model::WorkloadSet set;
    testing::GenerateInstance(rng, {}, &fleet, &set);
    Plan a = MakePlan(fleet, set, {});
    std::vector<std::string> errors = ValidatePlan(fleet, set, a, {});
    ASSERT_THAT(errors, IsEmpty()) << "instance " << i;
    Plan b = MakePlan(fleet, set, {});
    EXPECT_EQ(a.totals.gpus_after, b.totals.gpus_after);
    EXPECT_EQ(a.totals.nodes_after, b.totals.nodes_after);
    EXPECT_GE(a.totals.gpus_after, a.totals.lower_bound_gpus) << "instance " << i;
    EXPECT_LE(a.totals.gpus_after, a.totals.gpus_before + 2 * static_cast<int>(fleet.pools.size()))
        << "instance " << i;
  }
}

TEST(PlanValidator, CatchesBrokenPlans) {
  model::Fleet fleet{{MakePool("h100", "H100-80GB", 8, 2, 4)}};
  model::WorkloadSet set{{MakeWorkload("a", 4, 18 * kGiB, 200, Isolation::kMemory)}};
  Plan good = MakePlan(fleet, set, {});
  ASSERT_THAT(ValidatePlan(fleet, set, good, {}), IsEmpty());
  // A fifth tenant in a four-slot GPU.
  Plan over = good;
  for (NodePlan& n : over.pools[0].nodes) {
    for (GpuPlan& g : n.gpus) {
      if (!g.tenants.empty()) {
        g.tenants.resize(n.slots + 1, g.tenants[0]);
        break;
      }
    }
  }
  EXPECT_FALSE(ValidatePlan(fleet, set, over, {}).empty());
  // A replica dropped.
  Plan lost = good;
  for (NodePlan& n : lost.pools[0].nodes) {
    for (GpuPlan& g : n.gpus) {
      if (!g.tenants.empty()) {
        g.tenants.pop_back();
        break;
      }
    }
  }
  EXPECT_FALSE(ValidatePlan(fleet, set, lost, {}).empty());
  // Time-slicing for a memory-isolated workload.
  Plan ts = good;
  ts.placements[0].shape.kind = ShapeKind::kTimeSlicing;
  EXPECT_FALSE(ValidatePlan(fleet, set, ts, {}).empty());
}

}  // namespace
}  // namespace tessera::placement
