// Tessera's replica-count policy for one inference service: the request queue leads, GPU
// utilisation is the guard-rail, cold starts are anticipated, idle services scale to zero, and
// nothing scales down on data it does not have. Pure: the same code runs in `tessera scaler`
// (fed by Prometheus on the real clock) and in `tessera sim autoscale` (on a simulated clock).
// Every knob is documented in docs/autoscaling.md.
//
// Example:
//   AutoscalePolicy policy;                 // defaults
//   AutoscaleState state;                   // one per service, kept between calls
//   Decision d = DecideReplicas(policy, signals, state, clock.Now());
//   // scale the service to d.replicas; d.reason says why
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tessera::autoscale {

struct AutoscalePolicy {
  // Waiting requests per replica the service may hold (queue target). vLLM/TGI/Triton queue
  // requests beyond their batch; a few waiting per replica is normal, more means too few.
  double target_queue_per_replica = 4;
  // Mean GPU utilisation (0-1) of ready replicas to aim for, and the band around it within
  // which the utilisation signal alone changes nothing.
  double target_utilization = 0.75;
  double utilization_band = 0.10;  // +/- around the target
  int min_replicas = 0;            // warm baseline; 0 allows scale to zero
  int max_replicas = 100;
  // Scale to zero only after this long with no request waiting or running, nor completed (the
  // throughput signal, when there is one).
  absl::Duration idle_timeout = absl::Minutes(10);
  // From zero, scale to one when more than this many requests wait (strictly more).
  double activation_threshold = 0;
  // Scale-up: recommendations are acted on at once, at most max(step, ratio x current) more.
  int scale_up_step = 4;
  double scale_up_ratio = 1.0;  // +100%
  // Scale-down: the highest recommendation within the window wins (so a short lull does not
  // shed capacity a burst will need; recommendations made while no replica was ready do not
  // count), and at most max(step, ratio x current) replicas go per decision. (HPA ignores changes
  // within 10% of the current count, so a step of 2 out of 40 would never be acted on: the ratio
  // keeps steps above that tolerance.)
  absl::Duration scale_down_window = absl::Minutes(10);
  // Which recommendation of the window is held: 1 (the default), the highest, as HPA's
  // stabilisation window does; below 1, the lowest that at least this share of the window's
  // recommendations do not exceed (0.85 over a 20-minute window: the level most of it needed, so
  // a burst's replicas go sooner). For loads that many independent users smooth; a load whose
  // bursts return within the window wants its replicas back a cold start late
  // (docs/autoscaling.md, "Holding a quantile of the window"). Above 0, at most 1.
  double scale_down_quantile = 1;
  int scale_down_step = 2;
  double scale_down_ratio = 0.25;
  // Expected time from asking for a replica to it serving. The policy projects demand this far
  // ahead from its recent trend, so capacity is ready when the load arrives.
  absl::Duration cold_start = absl::Seconds(60);
  // Window over which the demand trend is estimated.
  absl::Duration trend_window = absl::Seconds(60);
  // Signals older than this are missing.
  absl::Duration stale_after = absl::Seconds(60);
  // Recurring load (batch jobs at the top of the hour, the working day's start): when, in each
  // of the last `seasonal_repeats` periods, the load within a lead (cold_start rounded up to
  // minutes, plus one) after this moment's phase was more than the rules above ask for now, and
  // the load now is at least target_utilization x what it was at this phase then, the replicas
  // for it start now, before it returns. Empty: off. Periods are whole minutes, period x repeats
  // at most 31 days; one no longer than the lead is ignored.
  std::vector<absl::Duration> seasonal_periods = {absl::Hours(1), absl::Hours(24)};
  int seasonal_repeats = 3;

  // InvalidArgument naming the knob when a value is out of range.
  absl::Status Validate() const;
};

struct Sample {
  double value = 0;
  absl::Time at = absl::InfinitePast();
  bool present = false;

  static Sample At(double v, absl::Time t) { return {v, t, true}; }
};

struct Signals {
  Sample waiting;      // requests queued, whole service
  Sample running;      // requests in a batch, whole service
  Sample utilization;  // mean GPU utilisation of ready replicas, 0-1 (optional)
  Sample ready;        // replicas serving
  Sample starting;     // replicas asked for, not yet serving
  // Requests completed per second, whole service (optional; e.g.
  // sum(rate(vllm:request_success_total[1m]))). With it the policy knows how long the queue
  // takes to drain, and adds no replica for a backlog that clears before one could start.
  Sample throughput;
};

// Kept by the caller between decisions for one service.
struct AutoscaleState {
  int current = 0;  // the last decision (what the service is scaled to)
  absl::Time last_busy = absl::InfinitePast();
  // Whether last_busy is an observation (demand, or data missing), not the first look's
  // assumption that the service was busy just before it.
  bool busy_seen = false;
  std::deque<std::pair<absl::Time, int>> recommendations;  // for the scale-down window
  // The first decision, and the last one made on fresh data.
  absl::Time started = absl::InfinitePast();
  absl::Time last_fresh = absl::InfinitePast();
  // The replicas found at the first look with data, held for one scale-down window from
  // restart_hold_at (the recommendations that would release them went with the previous
  // process); 0: no hold. MergeHistory lifts it when it brings those recommendations back.
  int restart_hold = 0;
  absl::Time restart_hold_at = absl::InfinitePast();
  std::deque<std::pair<absl::Time, double>> demand;  // for the trend
  double last_waiting = 0;
  // Requests one replica runs at once when full (vLLM's batch: max_num_seqs or the KV cache),
  // learned from the last moment requests waited while replicas ran; 0 until then.
  double batch_per_replica = 0;
  bool initialised = false;
  // For the seasonal rule: busy replica-equivalents per minute (the least seen in the minute), a
  // ring over the longest seasonal period x repeats plus the lead, indexed by minutes since the
  // epoch, from first_minute to last_minute (empty before the first decision).
  std::vector<double> load_by_minute;
  int64_t first_minute = 0;
  int64_t last_minute = 0;
};

struct Decision {
  int replicas = 0;
  std::string reason;
  bool data_ok = true;  // false: decided without fresh data (held, never lowered)
};

Decision DecideReplicas(const AutoscalePolicy& policy, const Signals& signals,
                        AutoscaleState& state, absl::Time now);

// How far back the seasonal rule looks: the longest period x seasonal_repeats, plus the lead and
// a minute. Zero when the rule is off. AutoscaleState keeps the per-minute load in a ring of this
// span; a decision under knobs of another span (a scaler's config reload) moves the history into
// a ring of the new span, keeping the latest minutes that fit. A longer span holds minutes earlier
// than the history reaches, which a scaler's reload rebuilds from Prometheus.
absl::Duration SeasonalHistory(const AutoscalePolicy& policy);

// How far back the seasonal rule reads: the longest period x seasonal_repeats (zero when the rule
// is off). The ring keeps the lead more, so a change of knobs that does not lengthen this (a
// longer coldStart alone) leaves the rule all the history it reads.
absl::Duration SeasonalReach(const AutoscalePolicy& policy);

// How much of a service's past a restarted scaler replays to rebuild what the policy learns
// from it: the seasonal rule's history, and at least the last day (for the batch per replica).
absl::Duration HistoryToRebuild(const AutoscalePolicy& policy);

// Adds to `live` what `past` learned, `past` being a state the same policy kept over an earlier
// span (a restarted scaler replays the service's signals from Prometheus through DecideReplicas
// into a state of its own):
// - its per-minute load for the seasonal rule: minutes `live` has not seen take `past`'s load,
//   minutes both saw the lesser (a minute's load is the least seen in it); minutes out of
//   `live`'s reach are left out; either history, kept under knobs of another span, is first
//   taken into this policy's ring (its latest minutes that fit);
// - the requests one replica runs when full (batch_per_replica), while `live` has not learned
//   it: without it a wake-up from zero asks for a replica per targetQueuePerReplica waiting;
// - when `past` decided on fresh data up to within staleAfter of `live`'s first decision (it is
//   the span just before this process started), what a restart otherwise resets: its
//   scale-down window's recommendations, which replace the hold of the replicas found; its
//   idle clock, unless `live` has seen demand since; its demand samples within trendWindow
//   (the trend the projection follows) and, before `live`'s first decision, the queue its last
//   decision saw (a backlog growing or draining). Merged before `live`'s first decision, they
//   count only if that decision comes within staleAfter of `past`'s last.
// Nothing else of `live` changes. Returns false when the window, idle clock and trend were not
// carried over (`past` made no decision on fresh data, or its last came more than staleAfter
// before `live`'s first).
bool MergeHistory(const AutoscalePolicy& policy, const AutoscaleState& past, AutoscaleState& live);

// The first part of MergeHistory alone: `past`'s per-minute load for the seasonal rule. For a
// service whose knobs lengthened that history's span (coldStart, seasonalPeriods,
// seasonalRepeats) while `live` kept deciding: `past` brings the minutes before those `live`
// kept; its scale-down window, idle clock, trend and batch are its own, and stay.
void MergeLoadHistory(const AutoscalePolicy& policy, const AutoscaleState& past,
                      AutoscaleState& live);

}  // namespace tessera::autoscale
