// `tessera sim autoscale`: replays every request of a trace through one inference service whose
// replicas a policy starts and stops, on a simulated clock, and reports GPU-hours against queue
// waits. The `tessera` policy is the production DecideReplicas; `keda-queue` and `hpa-cpu`
// emulate KEDA's Prometheus scaler on queue length and HPA on CPU with Kubernetes' rules.
// The serving model and its calibration are in docs/autoscaling.md.
//
// Example:
//   std::vector<SimRequest> reqs = RequestsFromAzure(rows, model, /*rate_scale=*/8, /*seed=*/1);
//   SimResult r = Simulate(reqs, model, options, PolicySpec{.kind = "tessera"});
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "autoscale/policy.h"

namespace tessera::sim {

// One replica = one GPU running vLLM with continuous batching, as a processor-sharing server:
// a request needs `work` seconds of a whole replica (prefill + decode at the batched rates),
// up to `max_batch` requests share it, the rest wait in one FIFO queue for the service.
struct ServingModel {
  double prefill_s_per_token = 1.0 / 9750;  // replica-seconds per prompt token
  double decode_s_per_token = 0.153 / 128;  // replica-seconds per generated token, batched
  int max_batch = 64;
  // CPU (for hpa-cpu): the server's HTTP and tokenisation work, not the GPU's.
  double cpu_s_per_request = 0.001;
  double cpu_s_per_prompt_token = 2e-6;
  double cpu_s_per_generated_token = 10e-6;
  double cpu_idle_cores = 0.05;
  double cpu_request_cores = 4;  // the pod's CPU request (HPA's 100%)

  double Work(int64_t context, int64_t generated) const {
    return context * prefill_s_per_token + generated * decode_s_per_token;
  }
  double Cpu(int64_t context, int64_t generated) const {
    return cpu_s_per_request + context * cpu_s_per_prompt_token +
           generated * cpu_s_per_generated_token;
  }
};

struct SimRequest {
  double arrival = 0;  // s
  double work = 0;     // replica-seconds
  double cpu = 0;      // core-seconds
};

struct TokenRow {
  double arrival_s = 0;
  int64_t context = 0;
  int64_t generated = 0;
};

// How `rate_scale` multiplies the load.
enum class RateMode {
  // Every request is replayed floor(K) times, plus once more with probability frac(K), each
  // copy shifted by a uniform offset in [0, 1) s (so copies do not arrive in the same instant):
  // the trace's bursts become K times as dense (a service whose users burst together).
  kDense,
  // The same copies, but each copy of the trace (the first as recorded) is shifted circularly by
  // its own uniform offset over the trace's span: K independent populations of users, whose
  // bursts overlap only by chance.
  kIndependent,
};
// Sorted by arrival.
std::vector<SimRequest> ScaleRequests(const std::vector<TokenRow>& rows, const ServingModel& m,
                                      double rate_scale, uint64_t seed,
                                      RateMode mode = RateMode::kDense);

struct RateWindow {
  double start_s = 0;
  double length_s = 600;
  double rate = 0;
  std::string distribution;  // Gamma | Weibull
  double p1 = 0, p2 = 0;     // shape, scale
};
// Synthesises arrivals window by window from each window's fitted inter-arrival distribution
// (the ServeGen recipe); every request has `context` prompt and `generated` output tokens.
std::vector<SimRequest> SynthesizeRequests(const std::vector<RateWindow>& windows,
                                           const ServingModel& m, double rate_scale,
                                           int64_t context, int64_t generated, uint64_t seed);

// KEDA's `fallback` of a ScaledObject (ScaledObjects only, AverageValue metrics): once reading
// the trigger's metric has failed `failure_threshold` times in a row, HPA is handed a metric that
// sizes the target to `Replicas(current)`. Without a fallback a failed read changes nothing (HPA
// keeps the count). Defaults: deploy/scaler/scaledobject.yaml.
struct KedaFallback {
  enum class Behavior {
    kStatic,                   // fallback.replicas (KEDA's default)
    kCurrentReplicas,          // the count there
    kCurrentReplicasIfHigher,  // the count there when above fallback.replicas, else those
    kCurrentReplicasIfLower,   // the count there when below fallback.replicas, else those
  };
  bool enabled = true;
  int failure_threshold = 3;
  int replicas = 2;
  Behavior behavior = Behavior::kCurrentReplicasIfHigher;
  int Replicas(int current) const;
  // "none", or "replicas=2,behavior=static,failureThreshold=3" (any of the three; the others
  // their defaults), behavior as the ScaledObject spells it.
  static absl::StatusOr<KedaFallback> Parse(const std::string& text);
  std::string ToString() const;
};

// A span during which something does not answer: Prometheus (every read of the policies that go
// through it fails: tessera's queries, keda-queue's Prometheus trigger), or the scaler itself.
struct Outage {
  double start_s = 0;
  double length_s = 0;
};
// "30m+10m,2h+5m": each START+LENGTH from the replay's start, in Go duration syntax; errors name
// `flag`.
absl::StatusOr<std::vector<Outage>> ParseOutages(const std::string& text,
                                                 const std::string& flag = "--outage");

struct SimOptions {
  double cold_start_s = 60;
  double slo_wait_s = 2;
  double dt_s = 0.05;  // fluid step
  int max_replicas = 200;
  // The first `warmup_s` seconds drive the policies but are not measured (every policy starts
  // from its floor of replicas, at least one, ready and idle, which is not how a service that has
  // been running under load looks): requests arriving
  // before it, GPU time before it and cold starts begun before it are not counted.
  double warmup_s = 0;
  // HPA's tolerance for every HPA-driven policy (tessera through KEDA, keda-queue, hpa-cpu): a
  // metric within this fraction of its target changes nothing. Kubernetes' default 0.1 is
  // cluster-wide; per HPA (behavior.scaleUp/scaleDown.tolerance) from Kubernetes 1.33 with the
  // HPAConfigurableTolerance feature gate, passed through by KEDA 2.18+.
  double hpa_tolerance = 0.1;
  // How often `tessera` decides. 0: once per HPA sync (15 s), stepping from the replicas there.
  // Above 0: every `scaler_poll_s`, as the running scaler polls (its prometheus.pollInterval),
  // each decision stepping from its previous one, HPA applying the latest at its sync.
  double scaler_poll_s = 0;
  // The scaler restarted every this many seconds (rollouts, evictions; 0: never): `tessera`'s
  // state starts afresh (from the replicas there, as after a real restart), with what the
  // policy learned from the past (the recurring-load history, the batch per replica, the
  // scale-down window, idle clock and demand trend) kept when
  // `scaler_backfill` (what the scaler rebuilds from Prometheus' range queries on start) or
  // lost.
  double scaler_restart_every_s = 0;
  bool scaler_backfill = true;
  // Where the trace ends (a ServeGen file's last window, a query_range body's last step, or
  // --duration): the run goes on without arrivals until then, or until the last request is
  // served if that is later, so that the replicas each policy keeps through an idle tail are
  // paid for as those through an idle start are. 0: the last request served ends the run.
  double end_s = 0;
  // Prometheus unreachable during these spans (sorted by start). tessera's decisions then hold
  // on missing data and its GetMetrics answers UNAVAILABLE, keda-queue's trigger fails; KEDA
  // counts a failure each time HPA reads the metric (every sync) and applies `fallback` from the
  // `failure_threshold`th. At zero neither wakes on a fallback (kedacore/keda#7239); tessera's
  // IsActive stays true on missing data, so a service at zero wakes to one. hpa-cpu (the metrics
  // server), fixed and clairvoyant are unaffected.
  std::vector<Outage> outages;
  KedaFallback fallback;
  // No replica of the scaler reachable during these spans (one replica on a failed node, until
  // its pod runs elsewhere; sorted by start): KEDA's GetMetricSpec fails before GetMetrics is
  // asked, so its fallback never counts (kedacore/keda#8056). HPA reads no metric and keeps the
  // count; IsActive fails, so nothing wakes from zero and nothing counts down to it. The scaler's
  // decisions go on unseen (on its return it rebuilds its history from Prometheus, which covers
  // the span, as one that ran all along would have it), and reach HPA again after the span.
  // tessera only.
  std::vector<Outage> scaler_outages;
};

// The `clairvoyant` reference: not a policy anyone can deploy (it reads the trace's future
// arrivals), but what perfect foresight buys under the same cold start, so that a target can be
// checked for feasibility. Replicas needed in second i: ceil(work arriving in [i, i + window) /
// window / utilization); each needed replica is started a cold start (plus one second, the
// plan's resolution) before it is needed and kept while it is needed again within a cold start
// (cheaper than a restart), so the replicas alive (starting or ready) in second t are the most
// needed in any second of [t, t + cold start + 1]. Returns that count per second of the trace.
std::vector<int> ClairvoyantPlan(const std::vector<SimRequest>& requests, double cold_start_s,
                                 double utilization, double window_s);

struct PolicySpec {
  std::string kind;                    // tessera | keda-queue | hpa-cpu | fixed | clairvoyant
  autoscale::AutoscalePolicy tessera;  // for kind == tessera
  double keda_target_queue = 5;        // keda-queue: waiting requests per replica (AverageValue)
  double hpa_cpu_target = 0.7;         // hpa-cpu: CPU utilisation of the request, 0-1
  int min_replicas = 0;  // floor of keda-queue (0 or more), hpa-cpu and fixed (at least 1)
  // clairvoyant: planned busy fraction of the needed replicas (above 1: fewer replicas than the
  // window's mean work, leaning on the batch and the SLO's wait)
  double clairvoyant_utilization = 0.75;
  double clairvoyant_window_s = 10;  // clairvoyant: demand averaged over this, >= 1 s
  std::map<std::string, double> Params() const;
};

struct SimResult {
  std::string policy;
  std::map<std::string, double> params;
  double gpu_hours = 0;       // ready + starting + draining replicas
  double busy_gpu_hours = 0;  // total work / replica capacity
  double utilization = 0;
  double slo_attainment = 0;
  double p50_wait_s = 0;
  double p99_wait_s = 0;
  int64_t requests = 0;
  int64_t over_60s = 0;
  int64_t cold_starts = 0;
  int peak_replicas = 0;
  double cpu_seconds = 0;  // simulator's own cost
};

SimResult Simulate(const std::vector<SimRequest>& requests, const ServingModel& model,
                   const SimOptions& options, const PolicySpec& policy);

// Simulate for each of `policies`, on up to `jobs` threads at once (each run is independent of
// the others): the results in the order of `policies`, the same as running them one by one
// (each run's cpu_seconds is its own thread's).
std::vector<SimResult> SimulateAll(const std::vector<SimRequest>& requests,
                                   const ServingModel& model, const SimOptions& options,
                                   const std::vector<PolicySpec>& policies, int jobs);

// The fluid lower bound on replicas over the measured span: the work of the requests arriving at
// or after `warmup_s`, over the time from then to the last arrival (0 when nothing is measured).
double MeanBusyReplicas(const std::vector<SimRequest>& requests, double warmup_s);

}  // namespace tessera::sim
