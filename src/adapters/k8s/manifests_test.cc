#include "adapters/k8s/manifests.h"

#include "adapters/io/files.h"
#include "adapters/k8s/decoders.h"
#include "adapters/k8s/plan_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "placement/planner.h"
#include "yaml-cpp/yaml.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;

struct Fixture {
  Fixture() {
    std::string dir = std::string(TESSERA_SOURCE_DIR) + "/tests/data/";
    fleet = *DecodeFleet("nodes.json", *ReadFile(dir + "kubectl-nodes.json"));
    std::vector<std::string> skipped;
    EXPECT_TRUE(
        DecodeWorkloads("d.yaml", *ReadFile(dir + "deployments.yaml"), &set, &skipped).ok());
    EXPECT_TRUE(DecodeWorkloads("w.yaml", R"(apiVersion: tessera.io/v1alpha1
kind: WorkloadSet
workloads:
  - {name: secure, namespace: t, replicas: 2, gpuMemory: 30Gi, gpuCompute: 0.3, isolation: full}
  - {name: llama-70b, namespace: llm, replicas: 1, gpuMemory: 150Gi, gpuCompute: 2})",
                                &set, &skipped)
                    .ok());
    plan = placement::MakePlan(fleet, set, {});
    configs = AssignNodeConfigs(fleet, plan);
  }
  model::Fleet fleet;
  model::WorkloadSet set;
  placement::Plan plan;
  NodeConfigs configs;
};

TEST(DeploymentFiles, RewritesTheGpuRequestOfTheGpuContainer) {
  Fixture f;
  absl::StatusOr<std::map<std::string, std::string>> files =
      DeploymentFiles(f.fleet, f.set, f.plan);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_TRUE(files->count("llm-chat-small.yaml"));
  YAML::Node d = YAML::Load(files->at("llm-chat-small.yaml"));
  const placement::WorkloadPlacement& wp = f.plan.placements[0];
  EXPECT_EQ(d["kind"].as<std::string>(), "Deployment");
  YAML::Node vllm = d["spec"]["template"]["spec"]["containers"][1];
  ASSERT_EQ(vllm["name"].as<std::string>(), "vllm");
  EXPECT_FALSE(vllm["resources"]["limits"]["nvidia.com/gpu"].IsDefined() &&
               wp.resource != "nvidia.com/gpu");
  EXPECT_EQ(vllm["resources"]["limits"][wp.resource].as<int>(), wp.resource_count);
  EXPECT_EQ(vllm["resources"]["requests"][wp.resource].as<int>(), wp.resource_count);
  EXPECT_EQ(vllm["resources"]["limits"]["memory"].as<std::string>(), "32Gi");  // untouched
  EXPECT_EQ(vllm["resources"]["requests"]["cpu"].as<std::string>(), "4");
  // The sidecar is untouched.
  EXPECT_FALSE(d["spec"]["template"]["spec"]["containers"][0]["resources"].IsDefined());
  for (const auto& [k, v] : wp.node_selector) {
    EXPECT_EQ(d["spec"]["template"]["spec"]["nodeSelector"][k].as<std::string>(), v);
  }
  EXPECT_TRUE(d["metadata"]["annotations"]["tessera.io/planned-shape"].IsDefined());
  // WorkloadSet entries get a strategic-merge patch.
  ASSERT_TRUE(files->count("t-secure.patch.yaml"));
  YAML::Node patch = YAML::Load(files->at("t-secure.patch.yaml"));
  YAML::Node c = patch["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["name"].as<std::string>(), "secure");
  EXPECT_THAT(c["resources"]["limits"].begin()->first.as<std::string>(), HasSubstr("nvidia.com/"));
}

TEST(ResourceClaimTemplates, MigAndExclusiveRequests) {
  Fixture f;
  std::string yaml = ResourceClaimTemplatesYaml(f.fleet, f.set, f.plan);
  std::vector<YAML::Node> docs = YAML::LoadAll(yaml);
  int mig = 0, whole = 0;
  for (const YAML::Node& d : docs) {
    if (!d.IsMap()) {
      continue;
    }
    EXPECT_EQ(d["apiVersion"].as<std::string>(), "resource.k8s.io/v1");
    EXPECT_EQ(d["kind"].as<std::string>(), "ResourceClaimTemplate");
    YAML::Node req = d["spec"]["spec"]["devices"]["requests"][0]["exactly"];
    std::string cls = req["deviceClassName"].as<std::string>();
    std::string cel = req["selectors"][0]["cel"]["expression"].as<std::string>();
    if (cls == "mig.nvidia.com") {
      ++mig;
      EXPECT_THAT(cel, HasSubstr("device.attributes[\"gpu.nvidia.com\"].profile == \""));
    } else {
      ++whole;
      EXPECT_EQ(cls, "gpu.nvidia.com");
      EXPECT_THAT(cel, HasSubstr("device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity("));
    }
  }
  EXPECT_GE(mig, 1);    // t/secure: full isolation on the MIG-capable pools
  EXPECT_GE(whole, 1);  // llm/llama-70b: two whole GPUs
}

TEST(LabelsScript, LabelsEveryExistingNode) {
  Fixture f;
  std::string sh = LabelsScript(f.fleet, f.plan, f.configs);
  EXPECT_THAT(sh, HasSubstr("#!/bin/sh"));
  for (const char* node : {"gpu-h100-a", "gpu-h100-b", "gpu-a100-mig", "gpu-l4-1"}) {
    EXPECT_THAT(sh, HasSubstr(std::string("kubectl label node ") + node + " --overwrite"));
  }
  EXPECT_THAT(sh, HasSubstr("nvidia.com/mig.config="));
  EXPECT_THAT(sh, HasSubstr("nvidia.com/device-plugin.config="));
}

TEST(PlanJson, DocumentedShape) {
  Fixture f;
  nlohmann::json j = nlohmann::json::parse(PlanJson(f.fleet, f.set, f.plan, f.configs, {}));
  EXPECT_EQ(j["kind"], "Plan");
  for (const char* k : {"gpus_before", "gpus_after", "lower_bound_gpus", "simple_lower_bound_gpus",
                        "cost_per_month_before", "cost_per_month_after"}) {
    EXPECT_TRUE(j["totals"].contains(k)) << k;
  }
  EXPECT_EQ(j["totals"]["gpus_after"], f.plan.totals.gpus_after);
  ASSERT_EQ(j["pools"].size(), f.fleet.pools.size());
  int tenants = 0;
  for (const auto& pool : j["pools"]) {
    for (const auto& node : pool["nodes"]) {
      for (const auto& gpu : node["gpus"]) {
        if (gpu["mode"] == "mig") {
          EXPECT_FALSE(gpu["mig_layout"].empty());
          EXPECT_TRUE(gpu["mig_layout"][0].contains("start"));
        }
        tenants += static_cast<int>(gpu["tenants"].size());
      }
    }
  }
  EXPECT_GT(tenants, 0);
  EXPECT_TRUE(j["unplaceable"].is_array());
  std::string report = PlanReport(f.fleet, f.set, f.plan);
  EXPECT_THAT(report, HasSubstr("GPUs before (one per replica)"));
  EXPECT_THAT(report, HasSubstr("Cost per month: $"));
}

}  // namespace
}  // namespace tessera::adapters
