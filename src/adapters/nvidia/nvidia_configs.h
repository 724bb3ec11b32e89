// NVIDIA Kubernetes-stack configuration from a Plan: mig-parted v1 configs (one named config
// per distinct node layout, selected by the `nvidia.com/mig.config` node label) and the
// k8s-device-plugin sharing configs (MPS / time-slicing, selected by
// `nvidia.com/device-plugin.config`). Formats: shared/reference/gpu-sharing.md sections 5-7.
//
// Example:
//   NodeConfigs configs = AssignNodeConfigs(fleet, plan);
//   std::string yaml = MigPartedYaml(fleet, plan, configs);
#pragma once

#include <map>
#include <string>
#include <vector>

#include "model/fleet.h"
#include "placement/plan.h"

namespace tessera::adapters {

inline constexpr char kAllDisabledMigConfig[] = "all-disabled";
inline constexpr char kDefaultDevicePluginConfig[] = "default";

// The configs one node needs.
struct NodeConfig {
  std::string mig_config;            // name in mig-parted.yaml
  std::string device_plugin_config;  // key in the device-plugin ConfigMap
};

struct NodeConfigs {
  // [pool][node] -> configs, parallel to Plan::pools[p].nodes.
  std::vector<std::vector<NodeConfig>> nodes;
};

// Names the MIG config of every node (nodes with the same GPU model and per-GPU MIG
// compositions share one) and its device-plugin config. Deterministic.
NodeConfigs AssignNodeConfigs(const model::Fleet& fleet, const placement::Plan& plan);

// mig-parted.yaml (version v1). Every GPU without MIG in a named config is mig-enabled false.
std::string MigPartedYaml(const model::Fleet& fleet, const placement::Plan& plan,
                          const NodeConfigs& configs);

// device-plugin-config.yaml: a ConfigMap (for the GPU Operator's devicePlugin.config.name or
// the plugin chart's config.name) with one key per sharing config plus "default".
std::string DevicePluginConfigYaml(const placement::Plan& plan, const NodeConfigs& configs,
                                   const std::string& namespace_name);

}  // namespace tessera::adapters
