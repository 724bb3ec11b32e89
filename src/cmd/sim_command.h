// `tessera sim autoscale`: replays an LLM-serving trace through the autoscaling policies and
// reports GPU-hours against queue-wait SLO attainment (docs/autoscaling.md).
#pragma once

#include <string>

namespace tessera::cmd {

struct SimAutoscaleFlags {
  std::string trace;
  std::string format = "azure";  // azure | servegen | prom-range
  std::string policies = "tessera,keda-queue,hpa-cpu";
  std::string cold_start = "60s";
  std::string slo_wait = "2s";
  double rate_scale = 1;
  std::string rate_mode = "dense";  // dense | independent (azure)
  int min_replicas = 0;             // tessera, keda-queue (0 = scale to zero); hpa-cpu at least 1
  std::string idle_timeout;         // tessera's idleTimeout; "" = 10m
  std::string scale_down_window;    // tessera's scaleDownWindow; "" = 10m
  std::string scale_down_quantile;  // tessera's scaleDownQuantile; "" = 1 (the highest)
  // tessera's seasonalPeriods, comma-separated ("1h,24h"), or "none"; "" = the defaults
  std::string seasonal_periods;
  // How often tessera decides, as a running scaler polls; "" = once per HPA sync (15 s), each
  // decision stepping from the replicas there. With --config, its prometheus.pollInterval.
  std::string poll_interval;
  // tessera's scaler restarted this often ("" = never), its history (recurring load, batch,
  // scale-down window, idle clock, trend) rebuilt on start unless `scaler_backfill` is "off" ("" =
  // on, or with --config its prometheus.backfill).
  std::string scaler_restarts;
  std::string scaler_backfill;
  // Prometheus outages ("30m+10m,2h+5m": START+LENGTH; "" = none), and the ScaledObjects'
  // fallback in them ("" = deploy/scaler/scaledobject.yaml's).
  std::string outages;
  std::string keda_fallback;
  // No replica of the scaler reachable ("30m+7m": START+LENGTH; "" = none).
  std::string scaler_outages;
  // tessera's knobs from one service of a `tessera scaler` config (kind ScalerConfig) instead of
  // the defaults and the flags above; `service` may be left out when the config has one.
  std::string config_file;
  std::string service;
  double hpa_tolerance = 0.1;     // HPA's tolerance (every HPA-driven policy)
  int64_t context_tokens = 1024;  // servegen, prom-range: tokens per request (none given)
  int64_t generated_tokens = 128;
  std::string duration;       // optional: only the first part of the trace
  std::string warmup = "0s";  // drives the policies, not measured
  uint64_t seed = 1;
  bool sweep = false;
  // Runs simulated at once (each on its own thread); 0: one per hardware thread.
  int jobs = 0;
  // tessera's knobs that reach this SLO attainment (a fraction) for the fewest GPU-hours over its
  // --sweep grid, printed as ScalerConfig fields; "" = none asked. With `holdout` (a duration),
  // chosen on the replay before its last `holdout` and then measured on that last part.
  std::string recommend;
  std::string holdout;
  // With --recommend and --config: rewrite this file as --config with the chosen knobs set on the
  // service (only those that differ; every other byte kept), once the choice reaches the target
  // (with `holdout`, on the held-out part too). May be the --config file itself.
  std::string write_config;
  std::string json_file;
};

// Exit status: 0 success; 1 bad input or I/O error.
int RunSimAutoscale(const SimAutoscaleFlags& flags);

}  // namespace tessera::cmd
