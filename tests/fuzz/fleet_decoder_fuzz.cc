// libFuzzer target: the Fleet / kubectl node-list decoder must return a value or a Status for
// any input, never crash, hang or leak. What decodes is planned with a small fixed workload set
// and every output of `tessera plan` is rendered; labels.sh, which an operator runs, may hold
// nothing but `kubectl label node` commands over names and labels Kubernetes allows.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "adapters/k8s/decoders.h"
#include "adapters/k8s/manifests.h"
#include "adapters/k8s/plan_json.h"
#include "adapters/nvidia/nvidia_configs.h"
#include "placement/planner.h"

namespace {

// A line of labels.sh: a comment, blank, the preamble, or a kubectl command whose every
// character is one a node name, label key or label value may hold.
bool SafeScriptLine(absl::string_view line) {
  if (line.empty() || line[0] == '#' || line == "set -eu") return true;
  if (!absl::StartsWith(line, "kubectl label node ")) return false;
  for (char c : line) {
    if (!(absl::ascii_isalnum(c) || c == ' ' || c == '-' || c == '.' || c == '_' || c == '/' ||
          c == '=')) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<model::Fleet> fleet = adapters::DecodeFleet("fuzz.yaml", text);
  if (!fleet.ok()) return 0;
  // Whatever decodes must also plan (small pools only, to stay fast).
  for (const auto& p : fleet->pools) {
    if (p.max_nodes > 64 || p.gpus_per_node > 16) return 0;
  }
  model::WorkloadSet set;
  std::vector<std::string> skipped;
  if (!adapters::DecodeWorkloads("w.yaml",
                                 "apiVersion: tessera.io/v1alpha1\nkind: WorkloadSet\nworkloads:\n"
                                 "  - {name: a, replicas: 3, gpuMemory: 10Gi, gpuCompute: 0.2}\n"
                                 "  - {name: b, replicas: 1, gpuMemory: 40Gi, gpuCompute: 1, "
                                 "isolation: full}\n",
                                 &set, &skipped)
           .ok()) {
    __builtin_trap();
  }
  placement::PlannerOptions options;
  placement::Plan plan = placement::MakePlan(*fleet, set, options);
  adapters::NodeConfigs configs = adapters::AssignNodeConfigs(*fleet, plan);
  (void)adapters::MigPartedYaml(*fleet, plan, configs);
  (void)adapters::DevicePluginConfigYaml(plan, configs, "gpu-operator");
  (void)adapters::PlanJson(*fleet, set, plan, configs, options);
  (void)adapters::PlanReport(*fleet, set, plan);
  (void)adapters::ResourceClaimTemplatesYaml(*fleet, set, plan);
  if (!adapters::DeploymentFiles(*fleet, set, plan).ok()) __builtin_trap();
  for (absl::string_view line :
       absl::StrSplit(adapters::LabelsScript(*fleet, plan, configs), '\n')) {
    if (!SafeScriptLine(line)) __builtin_trap();
  }
  return 0;
}
