#include "placement/plan.h"

namespace tessera::placement {

const char* ShapeKindName(ShapeKind k) {
  switch (k) {
    case ShapeKind::kExclusive:
      return "exclusive";
    case ShapeKind::kMig:
      return "mig";
    case ShapeKind::kMps:
      return "mps";
    case ShapeKind::kTimeSlicing:
      return "time-slicing";
  }
  return "?";
}

const char* GpuModeName(GpuMode m) {
  switch (m) {
    case GpuMode::kIdle:
      return "idle";
    case GpuMode::kExclusive:
      return "exclusive";
    case GpuMode::kMig:
      return "mig";
    case GpuMode::kMps:
      return "mps";
    case GpuMode::kTimeSlicing:
      return "time-slicing";
  }
  return "?";
}

const char* NodeSharingName(NodeSharing s) {
  switch (s) {
    case NodeSharing::kNone:
      return "none";
    case NodeSharing::kMps:
      return "mps";
    case NodeSharing::kTimeSlicing:
      return "time-slicing";
  }
  return "?";
}

int NodePlan::used_gpus() const {
  int n = 0;
  for (const GpuPlan& g : gpus) {
    n += g.tenants.empty() ? 0 : 1;
  }
  return n;
}

}  // namespace tessera::placement
