// `tessera scaler`: KEDA external scaler serving Tessera's replica decisions
// (docs/autoscaling.md).
#pragma once

#include <string>
#include <vector>

namespace tessera::cmd {

struct ScalerFlags {
  std::string config_file;
  std::string listen = "0.0.0.0:9095";
  std::string metrics_listen;  // HOST:PORT for GET /metrics (Prometheus); "" = none
  // Check the config and its files, query Prometheus once for every service, print each query's
  // answer and the decision it leads to, and exit instead of serving.
  bool check = false;
  // Check these files' KEDA ScaledObjects ("-": standard input) against the config's services,
  // offline (no Prometheus), print what each pairing changes or breaks, and exit.
  std::vector<std::string> check_scaledobjects;
  // How often the config file is read again while serving (its services' changes are taken
  // without a restart); "0s": never.
  std::string config_recheck = "10s";
};

// Runs until SIGTERM or SIGINT. Exit status: 0 after a signal; 1 bad config or address.
// With check: 0 every service decided on fresh data; 2 some query failed or found no series
// where one is needed (each named); 1 bad config. With check_scaledobjects: 0 no pairing is
// broken (warnings printed), 2 some is (each error named), 1 bad config or unreadable input.
int RunScaler(const ScalerFlags& flags);

}  // namespace tessera::cmd
