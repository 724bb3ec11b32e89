#include "cmd/plan_command.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "adapters/io/files.h"
#include "adapters/k8s/decoders.h"
#include "adapters/k8s/manifests.h"
#include "adapters/k8s/plan_json.h"
#include "adapters/nvidia/nvidia_configs.h"
#include "placement/plan_validator.h"
#include "placement/planner.h"

namespace tessera::cmd {

int RunPlan(const PlanFlags& flags) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "tessera plan: " << s.message() << "\n";
    return 1;
  };
  absl::StatusOr<std::string> fleet_text = adapters::ReadFile(flags.fleet_file);
  if (!fleet_text.ok()) {
    return fail(fleet_text.status());
  }
  std::vector<std::string> skipped_nodes;
  absl::StatusOr<model::Fleet> fleet =
      adapters::DecodeFleet(flags.fleet_file, *fleet_text, &skipped_nodes);
  if (!fleet.ok()) {
    return fail(fleet.status());
  }
  for (const std::string& s : skipped_nodes) {
    std::cerr << "tessera plan: skipped " << s << "\n";
  }
  model::WorkloadSet workloads;
  std::vector<std::string> skipped;
  for (const std::string& file : flags.workload_files) {
    absl::StatusOr<std::string> text = adapters::ReadFile(file);
    if (!text.ok()) {
      return fail(text.status());
    }
    if (absl::Status s = adapters::DecodeWorkloads(file, *text, &workloads, &skipped); !s.ok()) {
      return fail(s);
    }
  }
  for (const std::string& s : skipped) {
    std::cerr << "tessera plan: skipped Deployment " << s << "\n";
  }
  if (workloads.workloads.empty()) {
    return fail(absl::InvalidArgumentError(
        "no workloads to plan (no WorkloadSet entries and no Deployment with the "
        "tessera.io/gpu-memory annotation)"));
  }
  if (flags.options.time_slicing_oversubscription < 1.0) {
    return fail(absl::InvalidArgumentError(
        "--time-slicing-oversubscription must be at least 1.0 (1.0: none)"));
  }

  placement::Plan plan = placement::MakePlan(*fleet, workloads, flags.options);
  std::vector<std::string> violations =
      placement::ValidatePlan(*fleet, workloads, plan, flags.options);
  if (!violations.empty()) {
    std::cerr << "tessera plan: internal error, the plan breaks its own rules:\n";
    for (const std::string& v : violations) {
      std::cerr << "  " << v << "\n";
    }
    return 3;
  }
  adapters::NodeConfigs configs = adapters::AssignNodeConfigs(*fleet, plan);
  std::string json = adapters::PlanJson(*fleet, workloads, plan, configs, flags.options);

  if (!flags.out_dir.empty()) {
    adapters::OutputDir out;
    out.Add("plan.json", json);
    out.Add("mig-parted.yaml", adapters::MigPartedYaml(*fleet, plan, configs));
    out.Add("device-plugin-config.yaml",
            adapters::DevicePluginConfigYaml(plan, configs, flags.device_plugin_namespace));
    out.Add("labels.sh", adapters::LabelsScript(*fleet, plan, configs), /*executable=*/true);
    out.Add("resourceclaimtemplates.yaml",
            adapters::ResourceClaimTemplatesYaml(*fleet, workloads, plan));
    absl::StatusOr<std::map<std::string, std::string>> deployments =
        adapters::DeploymentFiles(*fleet, workloads, plan);
    if (!deployments.ok()) {
      return fail(deployments.status());
    }
    for (auto& [name, content] : *deployments) {
      out.Add(absl::StrCat("deployments/", name), content);
    }
    if (absl::Status s = out.Commit(flags.out_dir); !s.ok()) {
      return fail(s);
    }
  }
  if (flags.json) {
    std::cout << json;
  } else {
    std::cout << adapters::PlanReport(*fleet, workloads, plan);
    if (!flags.out_dir.empty()) {
      std::cout << "\nWrote " << flags.out_dir
                << "/: plan.json, mig-parted.yaml, device-plugin-config.yaml, labels.sh, "
                   "resourceclaimtemplates.yaml, deployments/\n";
    }
  }
  return plan.unplaceable.empty() ? 0 : 2;
}

}  // namespace tessera::cmd
