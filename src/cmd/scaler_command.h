// `tessera scaler`: KEDA external scaler serving Tessera's replica decisions
// (docs/autoscaling.md).
#pragma once

#include <string>

namespace tessera::cmd {

struct ScalerFlags {
  std::string config_file;
  std::string listen = "0.0.0.0:9095";
};

// Runs until SIGTERM or SIGINT. Exit status: 0 after a signal; 1 bad config or address.
int RunScaler(const ScalerFlags& flags);

}  // namespace tessera::cmd
