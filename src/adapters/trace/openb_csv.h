// Readers of Alibaba's GPU-sharing trace (cluster-trace-gpu-v2023, "openb") CSV files:
//   nodes: sn,cpu_milli,memory_mib,gpu,model
//   pods:  name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,...]
// gpu_spec: the GPU models a pod may run on, separated by '|'; empty or "nan": any.
// Columns are found by header name; errors name the file, line and column.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/gpushare/cluster_state.h"

namespace tessera::adapters {

absl::StatusOr<std::vector<placement::gpushare::NodeSpec>> ParseOpenbNodes(const std::string& file,
                                                                           const std::string& text);
absl::StatusOr<std::vector<placement::gpushare::PodSpec>> ParseOpenbPods(const std::string& file,
                                                                         const std::string& text);

}  // namespace tessera::adapters
