// `tessera plan`: wires the decoders, the planner and the writers together.
#pragma once

#include <string>
#include <vector>

#include "placement/shapes.h"

namespace tessera::cmd {

struct PlanFlags {
  std::string fleet_file;
  std::vector<std::string> workload_files;
  std::string out_dir;  // empty: write nothing
  bool json = false;    // print plan.json instead of the report
  std::string device_plugin_namespace = "gpu-operator";
  placement::PlannerOptions options;
};

// Exit status: 0 planned everything; 2 some replicas unplaceable (the rest planned and
// written); 1 bad input or I/O error (nothing written); 3 internal error.
int RunPlan(const PlanFlags& flags);

}  // namespace tessera::cmd
