// Decoders of `tessera plan`'s inputs (formats in docs/formats.md):
//   - a Fleet file (tessera.io/v1alpha1 Fleet), or `kubectl get nodes -o json` output, whose
//     GPU-feature-discovery labels are grouped into pools;
//   - WorkloadSet files, and Deployment manifests (YAML, multi-document, or a kubectl List)
//     with tessera.io/gpu-memory, tessera.io/gpu-compute, tessera.io/isolation annotations.
// Strict: unknown fields, bad quantities, unknown GPU models and empty inputs are errors that
// name the file, line, field and what was expected.
//
// Example:
//   absl::StatusOr<model::Fleet> fleet = DecodeFleet("fleet.yaml", text);
//   model::WorkloadSet set;
//   absl::Status s = DecodeWorkloads("deploy.yaml", text, &set);
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/fleet.h"

namespace tessera::adapters {

inline constexpr char kApiVersion[] = "tessera.io/v1alpha1";
inline constexpr char kGpuMemoryAnnotation[] = "tessera.io/gpu-memory";
inline constexpr char kGpuComputeAnnotation[] = "tessera.io/gpu-compute";
inline constexpr char kIsolationAnnotation[] = "tessera.io/isolation";
inline constexpr char kGpuModelsAnnotation[] = "tessera.io/gpu-models";

// A Fleet document or a kubectl node list (kind List/NodeList of Node). In a node list, a GPU node
// the labels cannot describe (a model the catalog lacks, a MIG layout whose physical GPU count
// cannot be told) is an error, or, when `skipped` is given, left out of the fleet and named there
// with the reason: one A40 in a cluster should not stop planning the rest.
absl::StatusOr<model::Fleet> DecodeFleet(absl::string_view file, absl::string_view text,
                                         std::vector<std::string>* skipped = nullptr);

// Appends the workloads of a WorkloadSet file or of Deployment manifests to `set`. Deployments
// without the tessera.io/gpu-memory annotation are skipped and named in `skipped`. Duplicate
// namespace/name across all inputs is an error.
absl::Status DecodeWorkloads(absl::string_view file, absl::string_view text,
                             model::WorkloadSet* set, std::vector<std::string>* skipped);

// A GPU compute value as the WorkloadSet and annotations write it: a share 0 < x <= 1 or a
// whole number N >= 1 of GPUs. Returns milli-GPU.
absl::StatusOr<int64_t> ParseGpuCompute(absl::string_view text);

}  // namespace tessera::adapters
