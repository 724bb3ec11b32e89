// Kubernetes manifests from a Plan: each workload's Deployment with its GPU request rewritten
// to the planned resource (or, for WorkloadSet input, a strategic-merge patch), the same
// requests as DRA ResourceClaimTemplates (resource.k8s.io/v1), and labels.sh with the
// `kubectl label node` commands that select each node's MIG and device-plugin configs.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "adapters/nvidia/nvidia_configs.h"
#include "model/fleet.h"
#include "placement/plan.h"

namespace tessera::adapters {

// File name (relative, under deployments/) -> content, one per placed workload.
absl::StatusOr<std::map<std::string, std::string>> DeploymentFiles(
    const model::Fleet& fleet, const model::WorkloadSet& workloads, const placement::Plan& plan);

// resourceclaimtemplates.yaml.
std::string ResourceClaimTemplatesYaml(const model::Fleet& fleet,
                                       const model::WorkloadSet& workloads,
                                       const placement::Plan& plan);

// labels.sh.
std::string LabelsScript(const model::Fleet& fleet, const placement::Plan& plan,
                         const NodeConfigs& configs);

}  // namespace tessera::adapters
