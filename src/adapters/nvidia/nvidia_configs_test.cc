#include "adapters/nvidia/nvidia_configs.h"

#include "base/units.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/mig_geometry.h"
#include "placement/planner.h"
#include "placement/test_fleets.h"
#include "yaml-cpp/yaml.h"

namespace tessera::adapters {
namespace {

using placement::testing::MakePool;
using placement::testing::MakeWorkload;
using ::testing::HasSubstr;

struct Fixture {
  model::Fleet fleet{{MakePool("h100", "H100-80GB", 4, 3, 6)}};
  model::WorkloadSet set{{MakeWorkload("secure", 4, 30 * kGiB, 300, model::Isolation::kFull),
                          MakeWorkload("tiny", 3, 8 * kGiB, 100, model::Isolation::kFull),
                          MakeWorkload("shared", 6, 18 * kGiB, 200, model::Isolation::kMemory),
                          MakeWorkload("big", 2, 70 * kGiB, 1000, model::Isolation::kNone),
                          MakeWorkload("embed", 40, 2 * kGiB, 20, model::Isolation::kMemory)}};
  placement::Plan plan = placement::MakePlan(fleet, set, {});
  NodeConfigs configs = AssignNodeConfigs(fleet, plan);
};

TEST(MigPartedYaml, ValidV1ConfigsWhoseCountsHaveLegalPlacements) {
  Fixture f;
  YAML::Node doc = YAML::Load(MigPartedYaml(f.fleet, f.plan, f.configs));
  EXPECT_EQ(doc["version"].as<std::string>(), "v1");
  ASSERT_TRUE(doc["mig-configs"].IsMap());
  EXPECT_EQ(doc.size(), 2u);  // only version and mig-configs: other keys are errors in v1
  const model::GpuModel& h100 = *f.fleet.pools[0].gpu;
  int mig_gpus = 0;
  for (const auto& config : doc["mig-configs"]) {
    ASSERT_TRUE(config.second.IsSequence());
    ASSERT_GT(config.second.size(), 0u);
    for (const auto& entry : config.second) {
      ASSERT_TRUE(entry["devices"].IsDefined());
      bool enabled = entry["mig-enabled"].as<bool>();
      if (!enabled) {
        EXPECT_FALSE(entry["mig-devices"].IsDefined() && entry["mig-devices"].size() > 0);
        continue;
      }
      std::vector<int> counts(h100.profiles.size(), 0);
      for (const auto& kv : entry["mig-devices"]) {
        int p = h100.ProfileIndex(kv.first.as<std::string>());
        ASSERT_GE(p, 0) << kv.first.as<std::string>();
        counts[p] = kv.second.as<int>();
      }
      EXPECT_TRUE(model::FindPlacement(h100, counts).has_value());
      mig_gpus += static_cast<int>(entry["devices"].size());
    }
  }
  EXPECT_GT(mig_gpus, 0);
  // Every node's label names a config in the file.
  for (const auto& pool : f.configs.nodes) {
    for (const NodeConfig& c : pool) {
      EXPECT_TRUE(doc["mig-configs"][c.mig_config].IsDefined()) << c.mig_config;
    }
  }
}

TEST(DevicePluginConfigYaml, ConfigMapWithOneKeyPerSharingConfig) {
  Fixture f;
  YAML::Node cm = YAML::Load(DevicePluginConfigYaml(f.plan, f.configs, "gpu-operator"));
  EXPECT_EQ(cm["kind"].as<std::string>(), "ConfigMap");
  EXPECT_EQ(cm["metadata"]["namespace"].as<std::string>(), "gpu-operator");
  ASSERT_TRUE(cm["data"]["default"].IsDefined());
  bool saw_mps = false;
  for (const auto& kv : cm["data"]) {
    YAML::Node config = YAML::Load(kv.second.as<std::string>());
    EXPECT_EQ(config["version"].as<std::string>(), "v1");
    EXPECT_EQ(config["flags"]["migStrategy"].as<std::string>(), "mixed");
    if (kv.first.as<std::string>().rfind("tessera-mps-", 0) == 0) {
      saw_mps = true;
      YAML::Node mps = config["sharing"]["mps"];
      EXPECT_TRUE(mps["renameByDefault"].as<bool>());
      EXPECT_EQ(mps["resources"][0]["name"].as<std::string>(), "nvidia.com/gpu");
      EXPECT_EQ(std::to_string(mps["resources"][0]["replicas"].as<int>()),
                kv.first.as<std::string>().substr(12));
    }
  }
  EXPECT_TRUE(saw_mps);
  for (const auto& pool : f.configs.nodes) {
    for (const NodeConfig& c : pool) {
      EXPECT_TRUE(cm["data"][c.device_plugin_config].IsDefined()) << c.device_plugin_config;
    }
  }
}

TEST(AssignNodeConfigs, EqualLayoutsShareAName) {
  Fixture f;
  ASSERT_EQ(f.configs.nodes.size(), 1u);
  ASSERT_EQ(f.configs.nodes[0].size(), f.plan.pools[0].nodes.size());
  for (size_t i = 0; i < f.plan.pools[0].nodes.size(); ++i) {
    for (size_t j = 0; j < f.plan.pools[0].nodes.size(); ++j) {
      const auto& a = f.plan.pools[0].nodes[i];
      const auto& b = f.plan.pools[0].nodes[j];
      bool same = true;
      for (size_t g = 0; g < a.gpus.size(); ++g) {
        same &= model::LayoutCounts(*f.fleet.pools[0].gpu, a.gpus[g].layout) ==
                model::LayoutCounts(*f.fleet.pools[0].gpu, b.gpus[g].layout);
      }
      EXPECT_EQ(same, f.configs.nodes[0][i].mig_config == f.configs.nodes[0][j].mig_config);
    }
  }
}

}  // namespace
}  // namespace tessera::adapters
