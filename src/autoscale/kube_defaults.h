// What KEDA and HPA do where a ScaledObject (and the HPA KEDA makes from it) says nothing:
// keda-docs' scaledobject-spec and Kubernetes' HorizontalPodAutoscaler (kube-controller-manager's
// --horizontal-pod-autoscaler-sync-period and scale-down stabilisation). One place for the
// ScaledObject checker, which warns where they override Tessera, and the simulator, which
// emulates them.
#pragma once

#include <cstdint>

namespace tessera::autoscale {

inline constexpr int64_t kKedaPollingIntervalS = 30;  // spec.pollingInterval
inline constexpr int64_t kKedaCooldownPeriodS = 300;  // spec.cooldownPeriod
inline constexpr int64_t kKedaMaxReplicaCount = 100;  // spec.maxReplicaCount
inline constexpr int64_t kHpaSyncS = 15;              // how often HPA reads the metric
inline constexpr int64_t kHpaScaleDownWindowS =
    300;  // behavior.scaleDown.stabilizationWindowSeconds

}  // namespace tessera::autoscale
