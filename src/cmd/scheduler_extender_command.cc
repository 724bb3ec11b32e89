#include "cmd/scheduler_extender_command.h"

#include <cstdlib>
#include <iostream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "adapters/io/files.h"
#include "adapters/k8s/extender_service.h"
#include "base/clock.h"
#include "cmd/listen_address.h"
#include "cmd/metrics_endpoint.h"
#include "cmd/signals.h"
#include "placement/gpushare/fragmentation.h"
#include "placement/gpushare/policies.h"

namespace tessera::cmd {
namespace {

int Fail(const std::string& message) {
  std::cerr << "tessera scheduler-extender: " << message << "\n";
  return 1;
}

// The problems of a restore or resync (pods not held), one stderr line each.
void Report(const char* what, const std::vector<std::string>& problems) {
  for (const std::string& p : problems) {
    std::cerr << "tessera scheduler-extender: " << what << ": " << p << "\n";
  }
}

}  // namespace

int RunSchedulerExtender(const ExtenderFlags& flags) {
  std::string host;
  int port = -1;
  if (!SplitListen(flags.listen, &host, &port)) {
    return Fail(absl::StrCat("--listen ", flags.listen, ": expected HOST:PORT, e.g. 0.0.0.0:8888"));
  }
  // (Negated so that NaN fails too.)
  if (!(flags.resync_seconds >= 0 && flags.resync_seconds <= 86400)) {
    return Fail(absl::StrCat("--resync ", flags.resync_seconds,
                             ": expected seconds from 0 (no lists, no watch) to 86400"));
  }
  if (!(flags.preempt_shares_seconds >= 0 && flags.preempt_shares_seconds <= 3600)) {
    return Fail(absl::StrCat("--preempt-shares ", flags.preempt_shares_seconds,
                             ": expected seconds from 0 (off) to 3600"));
  }
  if (!(flags.node_resync_seconds >= 0 && flags.node_resync_seconds <= 86400)) {
    return Fail(absl::StrCat(
        "--node-resync ", flags.node_resync_seconds,
        ": expected seconds from 0 (nodes listed with --resync, not watched) to 86400"));
  }

  // Restart recovery input: files if given, else the API.
  std::vector<placement::gpushare::OnlineNode> nodes;
  std::vector<adapters::PodInfo> pods;
  if (!flags.nodes_file.empty()) {
    absl::StatusOr<std::string> text = adapters::ReadFile(flags.nodes_file);
    if (!text.ok()) return Fail(std::string(text.status().message()));
    auto decoded = adapters::DecodeNodeListJson(*text);
    if (!decoded.ok())
      return Fail(absl::StrCat(flags.nodes_file, ": ", decoded.status().message()));
    nodes = *decoded;
  }
  if (!flags.pods_file.empty()) {
    absl::StatusOr<std::string> text = adapters::ReadFile(flags.pods_file);
    if (!text.ok()) return Fail(std::string(text.status().message()));
    auto decoded = adapters::DecodePodList(*text);
    if (!decoded.ok()) return Fail(absl::StrCat(flags.pods_file, ": ", decoded.status().message()));
    pods = *decoded;
  }

  std::unique_ptr<adapters::KubeClient> kube;
  if (!flags.kubeconfig.empty()) {
    absl::StatusOr<adapters::KubeConfig> cfg = adapters::LoadKubeconfig(flags.kubeconfig);
    if (!cfg.ok()) return Fail(std::string(cfg.status().message()));
    kube = std::make_unique<adapters::KubeClient>(*cfg);
  } else if (std::getenv("KUBERNETES_SERVICE_HOST") != nullptr) {
    absl::StatusOr<adapters::KubeConfig> cfg = adapters::InClusterConfig();
    if (!cfg.ok()) return Fail(std::string(cfg.status().message()));
    kube = std::make_unique<adapters::KubeClient>(*cfg);
  } else {
    std::cerr << "tessera scheduler-extender: no --kubeconfig and not in a pod: serving filter "
                 "and prioritize only; bind will answer with an error\n";
  }

  // FGD needs its target workload up front: the GPU pods running now.
  std::vector<placement::gpushare::PodSpec> running;
  for (const adapters::PodInfo& p : pods) {
    if (p.active() && p.assignment.has_value() && !p.assignment->gpus.empty()) {
      placement::gpushare::PodSpec s;
      s.num_gpu = static_cast<int>(p.assignment->gpus.size());
      s.gpu_milli = p.assignment->milli_per_gpu;
      running.push_back(s);
    }
  }
  auto policy = placement::gpushare::MakePolicy(flags.policy,
                                                placement::gpushare::BuildTargetWorkload(running));
  if (!policy.ok()) return Fail(absl::StrCat("--policy: ", policy.status().message()));

  adapters::ExtenderService svc(std::move(*policy), std::move(kube));
  bool have_api = !flags.kubeconfig.empty() || std::getenv("KUBERNETES_SERVICE_HOST") != nullptr;
  if (flags.preempt_shares_seconds > 0 && (!have_api || flags.resync_seconds <= 0)) {
    // It deletes pods through the API and learns from the pod watch when they are gone.
    return Fail("--preempt-shares needs the API (--kubeconfig or in a pod) and --resync above 0");
  }
  if (!nodes.empty() || !pods.empty()) {
    Report("restore", svc.Rebuild(nodes, pods));
  } else if (have_api) {
    absl::StatusOr<std::vector<std::string>> problems = svc.Sync();
    if (!problems.ok()) {
      return Fail(absl::StrCat("initial sync from the API: ", problems.status().message()));
    }
    Report("restore", *problems);
  }
  std::cerr << "tessera scheduler-extender: policy " << flags.policy << ", " << svc.held_pods()
            << " pods holding GPUs restored\n";

  // /metrics on its own address: the extender's port stays on loopback (its /bind must not be
  // reachable from the cluster), Prometheus scrapes this one.
  MetricsEndpoint metrics([&svc] { return svc.Metrics().body; });
  if (absl::Status m = metrics.Listen(flags.metrics_listen); !m.ok()) {
    return Fail(std::string(m.message()));
  }
  std::atomic<bool>& g_stop = StopOnSignal();
  std::thread follow;
  if (have_api && flags.resync_seconds > 0) {
    follow = std::thread([&svc, &flags, &g_stop] {
      RealClock clock;
      svc.Follow(clock, absl::Seconds(flags.resync_seconds),
                 absl::Seconds(flags.node_resync_seconds), g_stop, [](const std::string& line) {
                   std::cerr << "tessera scheduler-extender: " << line << "\n";
                 });
    });
  }
  RealClock preempt_clock;
  std::thread preempt;
  if (flags.preempt_shares_seconds > 0) {
    svc.EnableSharePreemption(&preempt_clock, absl::Seconds(flags.preempt_shares_seconds));
    preempt = std::thread([&svc, &g_stop] {
      svc.PreemptLoop(absl::Milliseconds(500), g_stop, [](const std::string& line) {
        std::cerr << "tessera scheduler-extender: " << line << "\n";
      });
    });
  }
  absl::Status s = ServeAnnounced(
      g_stop,
      [&](int bound) {
        return absl::StrCat("tessera scheduler-extender: listening on ", host, ":", bound,
                            metrics.Announcement(), "\n");
      },
      [&](std::atomic<int>* bound) {
        return adapters::ServeExtender(svc, host, port, &g_stop, bound);
      });
  metrics.Stop();
  if (follow.joinable()) follow.join();
  if (preempt.joinable()) preempt.join();
  if (!s.ok()) return Fail(std::string(s.message()));
  return 0;
}

}  // namespace tessera::cmd
