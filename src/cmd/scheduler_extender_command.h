// `tessera scheduler-extender`: serves kube-scheduler's HTTP extender protocol (filter,
// prioritize, bind) with the online GPU-sharing scheduler. See docs/scheduler-extender.md.
#pragma once

#include <string>

namespace tessera::cmd {

struct ExtenderFlags {
  std::string listen = "0.0.0.0:8888";
  std::string policy = "tessera";
  std::string kubeconfig;  // empty: the in-cluster service account, if running in a pod
  std::string nodes_file;  // optional `kubectl get nodes -o json`, instead of the API at start
  std::string pods_file;   // optional `kubectl get pods -A -o json`, instead of the API at start
  double resync_seconds = 300;
  double node_resync_seconds = 300;
  // Share preemption's delay after filter refused a pod (ExtenderService::
  // EnableSharePreemption); 0 = off.
  double preempt_shares_seconds = 0;
  std::string metrics_listen;  // HOST:PORT for GET /metrics only; "" = none
};

// Runs until SIGTERM or SIGINT. Exit status: 0 after a signal; 1 bad flags, input or address.
int RunSchedulerExtender(const ExtenderFlags& flags);

}  // namespace tessera::cmd
