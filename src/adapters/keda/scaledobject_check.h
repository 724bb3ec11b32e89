// Checks KEDA ScaledObjects against a `tessera scaler` config before they are applied: that each
// one pairing a workload with Tessera names one of the config's services, hands HPA Tessera's
// count unchanged (AverageValue, target 1), keeps the count in a Prometheus outage, adds no
// window or step limit of HPA's on top of Tessera's, and agrees with the service's floor,
// ceiling, idle timeout and TLS (docs/autoscaling.md, "Pairing it with KEDA").
//
// Example:
//   absl::StatusOr<PairingReport> r = CheckScaledObjects(config, "so.yaml", text);
//   for (const PairingFinding& f : r->findings) std::cout << f.where << ": " << f.message;
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "adapters/keda/scaler_config.h"

namespace tessera::adapters {

struct PairingFinding {
  // An error: the pairing does not work as Tessera decides (KEDA fails, or HPA scales to another
  // count). A warning: it works, and something of KEDA's or HPA's changes the decisions.
  bool error = false;
  size_t object = 0;    // the ScaledObject's place in PairingReport::objects
  std::string where;    // "file:line:col: field.path"
  std::string message;  // what is wrong and what to set
};

struct PairedObject {
  std::string object;   // "namespace/name"
  std::string service;  // the config's service its trigger names ("" when not paired)
};

struct PairingReport {
  std::vector<PairedObject> objects;  // every ScaledObject read, paired or not, in file order
  std::vector<PairingFinding> findings;
  int errors() const;
};

// Reads every ScaledObject (keda.sh/v1alpha1) in `text`, a YAML stream or JSON, also inside a
// List (`kubectl get scaledobjects -A -o yaml`); other kinds (a kustomize render's Deployments)
// are skipped. A ScaledObject is paired with Tessera by its triggers of type external or
// external-push that carry `metadata.service`. Errors: the text is not YAML, or holds no
// ScaledObject (InvalidArgument, located).
absl::StatusOr<PairingReport> CheckScaledObjects(const ScalerConfig& config, absl::string_view file,
                                                 absl::string_view text);

}  // namespace tessera::adapters
