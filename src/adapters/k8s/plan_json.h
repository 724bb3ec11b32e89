// plan.json: the machine-readable Plan (schema in docs/formats.md), and the readable report
// `tessera plan` prints.
#pragma once

#include <string>

#include "adapters/nvidia/nvidia_configs.h"
#include "model/fleet.h"
#include "placement/plan.h"
#include "placement/shapes.h"

namespace tessera::adapters {

std::string PlanJson(const model::Fleet& fleet, const model::WorkloadSet& workloads,
                     const placement::Plan& plan, const NodeConfigs& configs,
                     const placement::PlannerOptions& options);

std::string PlanReport(const model::Fleet& fleet, const model::WorkloadSet& workloads,
                       const placement::Plan& plan);

}  // namespace tessera::adapters
