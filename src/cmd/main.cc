// tessera: one binary, one subcommand per part (see docs/). Parses flags and dispatches.
#include <iostream>

#include "CLI/CLI.hpp"
#include "cmd/admission_webhook_command.h"
#include "cmd/fetch_command.h"
#include "cmd/node_agent_command.h"
#include "cmd/plan_command.h"
#include "cmd/scaler_command.h"
#include "cmd/scheduler_extender_command.h"
#include "cmd/sim_command.h"
#include "cmd/trace_bench_command.h"

namespace {

int Main(int argc, char** argv) {
  CLI::App app{"Tessera: make GPU inference fleets on Kubernetes use the GPUs they pay for"};
  app.require_subcommand(1);

  tessera::cmd::PlanFlags plan;
  CLI::App* plan_cmd = app.add_subcommand(
      "plan", "Plan GPU sharing (MIG, MPS, time-slicing) for a fleet and its workloads");
  plan_cmd
      ->add_option("--fleet", plan.fleet_file,
                   "Fleet file (tessera.io/v1alpha1 Fleet) or `kubectl get nodes -o json`")
      ->required();
  plan_cmd
      ->add_option("--workloads", plan.workload_files,
                   "WorkloadSet file or Deployment manifests (repeatable)")
      ->required();
  plan_cmd->add_option("--out", plan.out_dir,
                       "Directory to write plan.json, NVIDIA configs, labels.sh and manifests to");
  plan_cmd->add_flag("--json", plan.json, "Print plan.json instead of the report");
  plan_cmd->add_option("--time-slicing-oversubscription",
                       plan.options.time_slicing_oversubscription,
                       "Compute shares on a time-sliced GPU may add up to this (default 1.0)");
  plan_cmd
      ->add_option("--max-replicas-per-gpu", plan.options.max_slots,
                   "Most replicas sharing one GPU under MPS or time-slicing (default 48)")
      ->check(CLI::Range(2, 48));
  bool no_mps = false, no_ts = false, no_spread = false;
  plan_cmd->add_flag("--no-spread", no_spread,
                     "Do not require each workload's replicas on two nodes or more");
  plan_cmd->add_flag("--no-mps", no_mps, "Do not use MPS");
  plan_cmd->add_flag("--no-time-slicing", no_ts, "Do not use time-slicing");
  plan_cmd->add_option("--device-plugin-namespace", plan.device_plugin_namespace,
                       "Namespace of the device-plugin ConfigMap (default gpu-operator)");

  tessera::cmd::TraceBenchFlags bench;
  CLI::App* bench_cmd = app.add_subcommand(
      "trace-bench",
      "Replay Alibaba's GPU-sharing trace through scheduling policies (FGD protocol)");
  bench_cmd->add_option("--nodes", bench.nodes_file, "Node list CSV (openb_node_list_gpu_node.csv)")
      ->required();
  bench_cmd->add_option("--pods", bench.pods_file, "Pod list CSV (openb_pod_list_*.csv)")
      ->required();
  bench_cmd->add_option("--policy", bench.policies,
                        "Comma-separated policies of random, dotprod, clustering, packing, "
                        "bestfit, fgd, tessera (default fgd,bestfit)");
  bench_cmd->add_option("--seeds", bench.seeds, "Seeds: a range 42-51 or a list 42,43");
  bench_cmd->add_option("--inflate", bench.inflate,
                        "Arrived GPU request as a multiple of capacity (default 1.3)");
  bench_cmd->add_option("--json", bench.json_file, "Write per-run curves to this JSON file");
  bench_cmd->add_option("--ties", bench.ties,
                        "Score ties: first (first node in the per-seed order, as the FGD artifact "
                        "behaves) or random (kube-scheduler's reservoir sampling)");
  bench_cmd->add_flag("--explain", bench.explain,
                      "Also print where the unallocated GPUs are once 100% has arrived: the "
                      "failed pods by request, and the free share by where it lies");
  bench_cmd->add_flag("--bound", bench.bound,
                      "Also print the most any placement could allocate at each arrival level "
                      "(a linear programming bound over the arrived pods' GPU shares, per seed; "
                      "CPU, memory, nodes and GPU models left out)");
  bench_cmd->add_option("--baseline", bench.baseline,
                        "One of the --policy list: also print every other policy against it, "
                        "paired by seed (mean difference at 100% and 130% arrived, its standard "
                        "error, seeds ahead and behind)");

  tessera::cmd::ExtenderFlags ext;
  CLI::App* ext_cmd =
      app.add_subcommand("scheduler-extender",
                         "Serve kube-scheduler's HTTP extender protocol (filter, prioritize, "
                         "bind) with the GPU-sharing scheduler");
  ext_cmd->add_option("--listen", ext.listen, "HOST:PORT to serve on (default 0.0.0.0:8888)");
  ext_cmd->add_option("--policy", ext.policy,
                      "Scoring policy: tessera (default), fgd, bestfit, packing, clustering, "
                      "dotprod, random");
  ext_cmd->add_option("--kubeconfig", ext.kubeconfig,
                      "kubeconfig for the API (default: the in-cluster service account)");
  ext_cmd->add_option("--nodes", ext.nodes_file,
                      "Start from this `kubectl get nodes -o json` instead of listing the API");
  ext_cmd->add_option("--pods", ext.pods_file,
                      "Start from this `kubectl get pods -A -o json` instead of listing the API");
  ext_cmd->add_option(
      "--resync", ext.resync_seconds,
      "Seconds between lists of nodes and pods from the API, with pods watched in between "
      "(0: neither; default 300)");
  ext_cmd->add_option("--node-resync", ext.node_resync_seconds,
                      "Seconds between lists of the nodes, with nodes watched in between (0: "
                      "nodes listed with --resync, not watched; default 300)");
  ext_cmd->add_option(
      "--preempt-shares", ext.preempt_shares_seconds,
      "Preempt lower-priority GPU holders for a pod kept out by GPU share alone, which "
      "kube-scheduler never preempts for, this many seconds after filter refused it (0: never; "
      "default 0; needs the API and the RBAC to delete pods and patch pods/status)");
  ext_cmd->add_option("--metrics-listen", ext.metrics_listen,
                      "HOST:PORT serving only GET /metrics, for Prometheus (the extender's own "
                      "--listen stays private); default none");

  tessera::cmd::WebhookFlags hook;
  CLI::App* hook_cmd = app.add_subcommand(
      "admission-webhook",
      "Serve the mutating admission webhook that gives pods sharing a GPU (tessera.io/gpu-memory "
      "and tessera.io/gpu-compute) the env reading the extender's bind annotations");
  hook_cmd->add_option("--listen", hook.listen,
                       "HOST:PORT to serve HTTPS on (default 0.0.0.0:8443)");
  hook_cmd
      ->add_option("--tls-cert", hook.tls_cert,
                   "PEM certificate chain (read at every TLS handshake, so renewals apply)")
      ->required();
  hook_cmd->add_option("--tls-key", hook.tls_key, "PEM private key of --tls-cert")->required();
  hook_cmd->add_option("--scheduler-name", hook.scheduler_name,
                       "Set as spec.schedulerName of sharing pods that name none or "
                       "default-scheduler (default tessera-scheduler; \"\" leaves it)");
  hook_cmd->add_option("--metrics-listen", hook.metrics_listen,
                       "HOST:PORT serving GET /metrics over plain HTTP, for Prometheus (reviews "
                       "answered, the certificate's expiry, TLS renewals); default none");
  hook_cmd->add_option("--mps-directory", hook.mps_directory,
                       "Host directory of the nodes' MPS control daemons, one per GPU (deploy/mps: "
                       "/run/tessera/mps): sharing pods also get their pipes (DIR/pipes, with "
                       "CUDA_MPS_PIPE_DIRECTORY=DIR/pipes/gpu-$(NVIDIA_VISIBLE_DEVICES)) and "
                       "shared memory (DIR/shm at /dev/shm), so the MPS limits are enforced; "
                       "default none");

  tessera::cmd::FetchFlags fetchf;
  CLI::App* fetch_cmd = app.add_subcommand(
      "fetch", "Fetch a model's weights, directly (--to) or through the node agent (--agent)");
  fetch_cmd
      ->add_option("source", fetchf.source,
                   "http(s):// file, safetensors index or tessera manifest, or s3://bucket/prefix/")
      ->required();
  fetch_cmd->add_option("--to", fetchf.to,
                        "Directory to fetch into (appears complete or not at all)");
  fetch_cmd->add_option("--agent", fetchf.agent,
                        "Ask the node agent (unix:///PATH or http://HOST:PORT) instead of --to");
  fetch_cmd->add_option("--holder", fetchf.holder, "Lease holder (default $POD_NAME)");
  fetch_cmd->add_option("--lease-ttl", fetchf.lease_ttl, "Lease TTL (default 10m)");
  fetch_cmd->add_option("--path-file", fetchf.path_file,
                        "Also write the local path to this file (e.g. on an emptyDir)");
  fetch_cmd->add_flag("--hold", fetchf.hold,
                      "After printing the path, renew the lease until SIGTERM (sidecar)");
  fetch_cmd->add_option("--timeout", fetchf.timeout, "Give up after this long (default 10m)");
  fetch_cmd->add_option("--connections", fetchf.connections, "Parallel ranged GETs (default 8)");
  fetch_cmd->add_option("--chunk-size", fetchf.chunk_size, "Bytes per ranged GET (default 8Mi)");

  tessera::cmd::NodeAgentFlags agentf;
  CLI::App* agent_cmd = app.add_subcommand(
      "node-agent", "Node-local weight cache: fetch each model once per node, share it");
  agent_cmd->add_option("--cache-dir", agentf.cache_dir, "Cache directory (hostPath)")->required();
  agent_cmd->add_option("--max-bytes", agentf.max_bytes, "Disk budget, e.g. 500Gi")->required();
  agent_cmd->add_option("--listen", agentf.listen, "unix:///PATH to serve the API on (repeatable)");
  agent_cmd->add_option("--listen-http", agentf.listen_http,
                        "Also serve the API and /metrics on HOST:PORT");
  agent_cmd->add_option("--connections", agentf.connections,
                        "Parallel ranged GETs per fill (default 8)");
  agent_cmd->add_option("--chunk-size", agentf.chunk_size, "Bytes per ranged GET (default 8Mi)");
  agent_cmd->add_option("--lease-ttl", agentf.lease_ttl,
                        "Lease TTL when a request names none (default 10m)");

  tessera::cmd::ScalerFlags scal;
  CLI::App* scaler_cmd = app.add_subcommand(
      "scaler", "Serve Tessera's replica decisions to KEDA (external scaler gRPC protocol)");
  scaler_cmd->add_option("--config", scal.config_file, "ScalerConfig file")->required();
  scaler_cmd->add_option("--listen", scal.listen, "HOST:PORT to serve on (default 0.0.0.0:9095)");
  scaler_cmd->add_option("--metrics-listen", scal.metrics_listen,
                         "HOST:PORT to serve Prometheus metrics (GET /metrics), readiness "
                         "(GET /readyz) and each service's decision and why (GET /status) on, "
                         "over plain HTTP; default none");
  scaler_cmd->add_flag(
      "--check", scal.check,
      "Query Prometheus once for every service, print each answer and the "
      "decision, and exit (0: all data fresh; 2: some missing) instead of serving");
  scaler_cmd->add_option(
      "--check-scaledobjects", scal.check_scaledobjects,
      "Check the KEDA ScaledObjects in these files (YAML or JSON, a List too; - for standard "
      "input) against the config's services, offline, print what each pairing breaks (errors) "
      "or changes (warnings), and exit (0: nothing broken; 2: some error)");
  scaler_cmd->add_option("--config-recheck", scal.config_recheck,
                         "How often the config file is read again while serving: its services' "
                         "changes are taken without a restart (default 10s; 0s: never)");

  tessera::cmd::SimAutoscaleFlags simf;
  CLI::App* sim_cmd = app.add_subcommand("sim", "Trace-driven simulations");
  sim_cmd->require_subcommand(1);
  CLI::App* sim_as = sim_cmd->add_subcommand(
      "autoscale", "Replay an LLM-serving trace through autoscaling policies");
  sim_as->add_option("--trace", simf.trace, "Trace file")->required();
  sim_as->add_option("--format", simf.format,
                     "azure (Azure LLM inference traces, 2023 or 2024), servegen, or prom-range (a "
                     "Prometheus query_range JSON body of one request-rate series)");
  sim_as->add_option(
      "--policy", simf.policies,
      "Comma-separated: tessera,keda-queue,hpa-cpu,fixed,clairvoyant (a perfect-foresight "
      "reference)");
  sim_as->add_option("--cold-start", simf.cold_start, "Replica start-up time (default 60s)");
  sim_as->add_option("--slo-wait", simf.slo_wait, "Queue-wait SLO (default 2s)");
  sim_as->add_option("--rate-scale", simf.rate_scale,
                     "Load multiplier K: each request replayed K times (fractions by chance), "
                     "copies offset by under 1 s");
  sim_as->add_option("--rate-mode", simf.rate_mode,
                     "How --rate-scale copies an azure trace: dense (default: each copy within 1 s "
                     "of its original, bursts K times as dense) or independent (each copy of the "
                     "trace shifted circularly by its own random offset)");
  sim_as->add_option("--min-replicas", simf.min_replicas,
                     "Floor of replicas, up at the start: tessera and keda-queue (default 0: scale "
                     "to zero), hpa-cpu (at least 1)");
  sim_as->add_option("--scale-down-window", simf.scale_down_window,
                     "tessera's scaleDownWindow: the highest recommendation within it wins "
                     "(default 10m)");
  sim_as->add_option("--scale-down-quantile", simf.scale_down_quantile,
                     "tessera's scaleDownQuantile: which of the window's recommendations is held, "
                     "1 the highest (default), 0.85 the lowest that 85% of them do not exceed");
  sim_as->add_option("--hpa-tolerance", simf.hpa_tolerance,
                     "HPA's tolerance for tessera, keda-queue and hpa-cpu (default 0.1, "
                     "Kubernetes' default; per HPA with the HPAConfigurableTolerance gate)");
  sim_as->add_option("--poll-interval", simf.poll_interval,
                     "tessera decides this often, as the running scaler polls (its "
                     "prometheus.pollInterval), each decision stepping from its previous one and "
                     "HPA applying the latest at its 15 s sync (default: one decision per sync, "
                     "from the replicas there; with --config, the config's pollInterval)");
  sim_as->add_option("--scaler-restarts", simf.scaler_restarts,
                     "tessera's scaler restarted this often (rollouts, evictions): its state "
                     "starts afresh from the replicas there, held for a scale-down window "
                     "(default: never)");
  sim_as->add_option(
      "--scaler-backfill", simf.scaler_backfill,
      "With --scaler-restarts: on (default; with --config its "
      "prometheus.backfill) keeps what the policy learned from the past (recurring "
      "load, batch per replica, scale-down window, idle clock, demand trend), as the "
      "scaler rebuilds it from Prometheus on start; off loses it");
  sim_as->add_option("--outage", simf.outages,
                     "Prometheus unreachable during these spans, START+LENGTH from the replay's "
                     "start, comma-separated (30m+10m,2h+5m): tessera holds on missing data and "
                     "answers UNAVAILABLE, keda-queue's trigger fails, KEDA's fallback applies "
                     "(--keda-fallback); hpa-cpu reads the metrics server and is unaffected");
  sim_as->add_option("--scaler-outage", simf.scaler_outages,
                     "No tessera scaler replica reachable during these spans, START+LENGTH as "
                     "--outage (one replica on a failed node until its pod runs elsewhere): KEDA's "
                     "fallback never applies (kedacore/keda#8056), HPA keeps the count, nothing "
                     "wakes from zero; tessera only");
  sim_as->add_option("--keda-fallback", simf.keda_fallback,
                     "The ScaledObjects' fallback in an --outage: none (HPA keeps the count), or "
                     "replicas=N,behavior=B,failureThreshold=N with B static, currentReplicas, "
                     "currentReplicasIfHigher or currentReplicasIfLower (default as "
                     "deploy/scaler/scaledobject.yaml: "
                     "replicas=2,behavior=currentReplicasIfHigher,failureThreshold=3)");
  sim_as->add_option("--seasonal-periods", simf.seasonal_periods,
                     "tessera's seasonalPeriods: comma-separated periods of recurring load to "
                     "start replicas ahead of (default 1h,24h), or none");
  sim_as->add_option("--idle-timeout", simf.idle_timeout,
                     "tessera: idle time before scaling to zero (default 10m)");
  sim_as->add_option("--config", simf.config_file,
                     "tessera's knobs from a `tessera scaler` config (kind ScalerConfig) instead "
                     "of the defaults: the policy the scaler would run");
  sim_as->add_option("--service", simf.service,
                     "With --config: which of its services (may be left out when it has one)");
  sim_as->add_option("--context-tokens", simf.context_tokens,
                     "servegen, prom-range: prompt tokens per request (default 1024)");
  sim_as->add_option("--generated-tokens", simf.generated_tokens,
                     "servegen, prom-range: generated tokens per request (default 128)");
  sim_as->add_option("--duration", simf.duration, "Replay only this much of the trace");
  sim_as->add_option("--warmup", simf.warmup,
                     "Replay but do not measure the trace's first D (default 0s): every policy "
                     "starts from its floor of replicas, idle");
  sim_as->add_option("--seed", simf.seed, "Seed for load scaling and synthesis (default 1)");
  sim_as->add_option("--jobs", simf.jobs,
                     "Runs simulated at once, each on its own thread (default 0: one per hardware "
                     "thread); the results do not depend on it");
  sim_as->add_flag("--sweep", simf.sweep,
                   "Run each policy over a grid of its main knob and print the frontier");
  sim_as->add_option("--recommend", simf.recommend,
                     "Print tessera's knobs that reach this SLO attainment (a fraction: 0.99) "
                     "for the fewest GPU-hours, as ScalerConfig fields: from its --sweep grid, "
                     "then scale-down windows and quantiles around the cheapest (one holding "
                     "less must reach it on each half of the replay too)");
  sim_as->add_option("--holdout", simf.holdout,
                     "With --recommend: choose on the replay before its last D, then measure the "
                     "choice and the base knobs on that last D");
  sim_as->add_option("--write-config", simf.write_config,
                     "With --recommend and --config: write the config with the chosen knobs set "
                     "on the service (the rest kept byte for byte; may be the --config file "
                     "itself), if the choice reaches the target (with --holdout, held out too)");
  sim_as->add_option("--json", simf.json_file, "Write the runs to this JSON file");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (plan_cmd->parsed()) {
    plan.options.allow_mps = !no_mps;
    plan.options.allow_time_slicing = !no_ts;
    plan.options.spread_replicas = !no_spread;
    return tessera::cmd::RunPlan(plan);
  }
  if (bench_cmd->parsed()) {
    return tessera::cmd::RunTraceBench(bench);
  }
  if (fetch_cmd->parsed()) {
    return tessera::cmd::RunFetch(fetchf);
  }
  if (agent_cmd->parsed()) {
    return tessera::cmd::RunNodeAgent(agentf);
  }
  if (scaler_cmd->parsed()) {
    return tessera::cmd::RunScaler(scal);
  }
  if (sim_as->parsed()) {
    return tessera::cmd::RunSimAutoscale(simf);
  }
  if (ext_cmd->parsed()) {
    return tessera::cmd::RunSchedulerExtender(ext);
  }
  if (hook_cmd->parsed()) {
    return tessera::cmd::RunAdmissionWebhook(hook);
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Library code reports errors as Status; an exception reaching here is a bug, reported
  // plainly rather than as an abort.
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "tessera: internal error: " << e.what() << "\n";
    return 3;
  }
}
