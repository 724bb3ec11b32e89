// libFuzzer target: the WorkloadSet / Deployment decoder must return OK or a Status for any
// input; what decodes is planned on a small fixed fleet, the plan must validate, and the
// Deployments it rewrites must render.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "adapters/k8s/decoders.h"
#include "adapters/k8s/manifests.h"
#include "placement/plan_validator.h"
#include "placement/planner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  tessera::model::WorkloadSet set;
  std::vector<std::string> skipped;
  absl::Status s = tessera::adapters::DecodeWorkloads("fuzz.yaml", text, &set, &skipped);
  if (!s.ok() || set.workloads.empty()) {
    return 0;
  }
  int replicas = 0;
  for (const auto& w : set.workloads) {
    replicas += w.replicas;
  }
  if (replicas > 200) {
    return 0;
  }
  absl::StatusOr<tessera::model::Fleet> fleet = tessera::adapters::DecodeFleet(
      "fleet.yaml",
      "apiVersion: tessera.io/v1alpha1\nkind: Fleet\npools:\n"
      "  - {name: h100, gpuModel: H100-80GB, gpusPerNode: 8, nodes: 2, maxNodes: 8}\n"
      "  - {name: l4, gpuModel: L4, gpusPerNode: 4, nodes: 1, maxNodes: 4}\n");
  if (!fleet.ok()) {
    __builtin_trap();
  }
  tessera::placement::Plan plan = tessera::placement::MakePlan(*fleet, set, {});
  if (!tessera::placement::ValidatePlan(*fleet, set, plan, {}).empty()) {
    __builtin_trap();  // a plan that breaks its own rules is a bug
  }
  if (!tessera::adapters::DeploymentFiles(*fleet, set, plan).ok()) {
    __builtin_trap();  // a Deployment the decoder accepted must render
  }
  return 0;
}
