#include "autoscale/policy.h"

#include <cmath>
#include <functional>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::autoscale {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

Signals At(absl::Time t, double waiting, double running, double ready, double starting = 0,
           std::optional<double> util = std::nullopt) {
  Signals s;
  s.waiting = Sample::At(waiting, t);
  s.running = Sample::At(running, t);
  s.ready = Sample::At(ready, t);
  s.starting = Sample::At(starting, t);
  if (util) s.utilization = Sample::At(*util, t);
  return s;
}

// The defaults, scaling down by at most 2 a decision (no ratio) to the window's hold.
AutoscalePolicy DownByTwoAfter(absl::Duration window) {
  AutoscalePolicy p;
  p.scale_down_window = window;
  p.scale_down_step = 2;
  p.scale_down_ratio = 0;
  return p;
}

// The state of a service the scaler has been running at `current` replicas.
AutoscaleState RunningAt(int current) {
  AutoscaleState st;
  st.current = current;
  st.initialised = true;
  return st;
}

// Decides every 5 s for `span` on the same load and expects `replicas` each time; returns the
// time of the last decision.
absl::Time ExpectHeldFor(const AutoscalePolicy& p, AutoscaleState& st, absl::Time t,
                         absl::Duration span, double waiting, double running, double ready,
                         double util, int replicas) {
  for (absl::Time end = t + span; t < end;) {
    t += absl::Seconds(5);
    Decision d = DecideReplicas(p, At(t, waiting, running, ready, 0, util), st, t);
    EXPECT_EQ(d.replicas, replicas) << absl::FormatTime(t) << " " << d.reason;
  }
  return t;
}

TEST(AutoscalePolicy, DefaultsValidateAndBadKnobsAreNamed) {
  AutoscalePolicy p;
  EXPECT_TRUE(p.Validate().ok());
  p.target_utilization = 1.5;
  EXPECT_THAT(p.Validate().message(), HasSubstr("targetUtilization"));
  p = AutoscalePolicy();
  p.max_replicas = 0;
  EXPECT_THAT(p.Validate().message(), HasSubstr("maxReplicas"));
  p = AutoscalePolicy();
  p.min_replicas = 5;
  p.max_replicas = 3;
  EXPECT_FALSE(p.Validate().ok());
}

TEST(AutoscalePolicy, QueueScalesUpWithStepLimits) {
  AutoscalePolicy p;
  p.scale_up_step = 4;
  p.scale_up_ratio = 1.0;
  AutoscaleState st;
  // 2 replicas each running 16 with 100 waiting: 132 in the system at 16 + 4 per replica.
  Decision d = DecideReplicas(p, At(kT0, 100, 32, 2), st, kT0);
  EXPECT_EQ(d.replicas, 6) << d.reason;  // want 7, capped at 2 + max(4, 2)
  EXPECT_THAT(d.reason, HasSubstr("scale up"));
  d = DecideReplicas(p, At(kT0 + absl::Seconds(5), 100, 32, 2, 4), st, kT0 + absl::Seconds(5));
  EXPECT_EQ(d.replicas, 7) << d.reason;
}

TEST(AutoscalePolicy, BatchSizeLearnedFromSaturationNotFromThinLoad) {
  AutoscalePolicy p;
  p.scale_down_window = absl::ZeroDuration();
  p.trend_window = absl::ZeroDuration();  // no projection: the rule alone
  AutoscaleState st = RunningAt(20);
  st.last_busy = kT0;
  // Before any saturation: 120 running over 20 replicas (6 each) -> 120 / (6 + 4) = 12.
  Decision d = DecideReplicas(p, At(kT0, 0, 120, 20), st, kT0);
  EXPECT_EQ(d.replicas, 15) << d.reason;  // towards 12, at most max(2, 25%) down per step
  // Saturated once: 10 replicas full at 64 each with a queue: the batch is 64.
  st.current = 10;
  d = DecideReplicas(p, At(kT0 + absl::Seconds(15), 50, 640, 10), st, kT0 + absl::Seconds(15));
  EXPECT_EQ(st.batch_per_replica, 64);
  EXPECT_EQ(d.replicas, 11) << d.reason;  // (50 + 640) / (64 + 4) -> 11
  // Thin load again, spread over 20 replicas: 120 running need 2 (120 / 68), not 12.
  st.current = 20;
  d = DecideReplicas(p, At(kT0 + absl::Seconds(30), 0, 120, 20), st, kT0 + absl::Seconds(30));
  EXPECT_EQ(d.replicas, 15) << d.reason;  // stepping down towards 2
  EXPECT_THAT(d.reason, HasSubstr("-> 2"));
}

TEST(AutoscalePolicy, UtilisationGuardRailAndBand) {
  AutoscalePolicy p;  // target 0.75 +/- 0.10
  AutoscaleState st;
  // No queue but GPUs saturated: add headroom.
  Decision d = DecideReplicas(p, At(kT0, 0, 8, 4, 0, 1.0), st, kT0);
  EXPECT_EQ(d.replicas, 6) << d.reason;  // ceil(4 / 0.75)
  // In band: the utilisation says nothing.
  AutoscaleState st2;
  d = DecideReplicas(p, At(kT0, 0, 8, 4, 0, 0.80), st2, kT0);
  EXPECT_EQ(d.replicas, 4) << d.reason;
}

TEST(AutoscalePolicy, ScaleDownWaitsForTheWindowAndStepsDown) {
  AutoscalePolicy p = DownByTwoAfter(absl::Minutes(3));
  AutoscaleState st = RunningAt(10);
  absl::Time t = kT0;
  Decision d = DecideReplicas(p, At(t, 40, 160, 10, 0, 0.8), st, t);
  EXPECT_EQ(d.replicas, 10) << d.reason;
  // Load drops to almost nothing: held for the window, then down by 2 per decision.
  t = ExpectHeldFor(p, st, t, absl::Minutes(3), 0, 2, 10, 0.1, 10);
  t += absl::Seconds(5);
  d = DecideReplicas(p, At(t, 0, 2, 10, 0, 0.1), st, t);
  EXPECT_EQ(d.replicas, 8) << d.reason;
  EXPECT_THAT(d.reason, HasSubstr("scale down"));
  // With the ratio, steps stay above HPA's 10% tolerance: 25% of 8 is 2, of 40 is 10.
  p.scale_down_ratio = 0.25;
  AutoscaleState big = RunningAt(40);
  p.scale_down_window = absl::ZeroDuration();
  t += absl::Seconds(5);
  EXPECT_EQ(DecideReplicas(p, At(t, 0, 2, 40, 0, 0.1), big, t).replicas, 30);
}

TEST(AutoscalePolicy, AQuantileOfTheWindowReleasesABurstButNeverGoesBelowTheDecision) {
  AutoscalePolicy p = DownByTwoAfter(absl::Minutes(10));
  AutoscaleState highest = RunningAt(10);
  AutoscaleState quantile = highest;
  AutoscalePolicy q = p;
  q.scale_down_quantile = 0.85;
  // A burst asks for 10 (util 0.8 in the band at 10 ready, and the queue), then the load needs 4
  // (util 0.3 at 10 ready: 3 busy / 0.75).
  absl::Time t = kT0;
  EXPECT_EQ(DecideReplicas(p, At(t, 40, 160, 10, 0, 0.8), highest, t).replicas, 10);
  EXPECT_EQ(DecideReplicas(q, At(t, 40, 160, 10, 0, 0.8), quantile, t).replicas, 10);
  // The highest is held for the whole window.
  ExpectHeldFor(p, highest, t, absl::Minutes(10), 0, 20, 10, 0.3, 10);
  // At 0.85 the burst's 10 is held while it is more than 15% of the window's decisions: with n
  // decisions the ceil(0.85 n)-th lowest is 10 up to n = 6, 4 from n = 7 (30 s after it).
  t = ExpectHeldFor(q, quantile, t, absl::Seconds(25), 0, 20, 10, 0.3, 10);
  for (int expected : {8, 6, 4, 4}) {
    t += absl::Seconds(5);
    Decision d = DecideReplicas(q, At(t, 0, 20, 10, 0, 0.3), quantile, t);
    EXPECT_EQ(d.replicas, expected) << d.reason;
    if (expected < 10 && expected > 4) {
      EXPECT_THAT(d.reason, HasSubstr("quantile 0.85 of the last 10m is 4"));
    }
  }
  // Five minutes at 4 (util 0.75 at 4 ready), so the window is mostly 4s; then a decision that
  // asks for 6 (util 0.37 at 12 ready: 4.44 busy / 0.75) is not taken below 6, whatever the steps
  // allow, though the quantile is 4.
  t = ExpectHeldFor(q, quantile, t, absl::Minutes(5), 0, 20, 4, 0.75, 4);
  q.scale_down_step = 100;
  quantile.current = 12;
  t += absl::Seconds(5);
  Decision d = DecideReplicas(q, At(t, 0, 20, 12, 0, 0.37), quantile, t);
  EXPECT_EQ(d.replicas, 6) << d.reason;
  // Out of range: named.
  for (double bad : {0.0, -0.5, 1.5, std::nan("")}) {
    q.scale_down_quantile = bad;
    EXPECT_THAT(q.Validate().message(), HasSubstr("scaleDownQuantile")) << bad;
  }
}

TEST(AutoscalePolicy, TransientBacklogAddsNoReplica) {
  AutoscalePolicy p;
  p.cold_start = absl::Seconds(60);
  AutoscaleState st = RunningAt(4);
  st.last_waiting = 200;
  // 100 waiting, falling, served at 20/s: drains in 5 s, long before a replica could start.
  Signals s = At(kT0, 100, 64, 4, 0, 0.8);
  s.throughput = Sample::At(20, kT0);
  Decision d = DecideReplicas(p, s, st, kT0);
  EXPECT_EQ(d.replicas, 4) << d.reason;
  EXPECT_THAT(d.reason, HasSubstr("drains"));
  // The same queue growing: not transient.
  st.last_waiting = 50;
  d = DecideReplicas(p, s, st, kT0 + absl::Seconds(5));
  EXPECT_GT(d.replicas, 4) << d.reason;
}

TEST(AutoscalePolicy, ScaleToZeroOnlyAfterIdleTimeoutAndBackOnActivation) {
  AutoscalePolicy p;
  p.idle_timeout = absl::Minutes(10);
  p.scale_down_window = absl::Minutes(1);
  p.activation_threshold = 0;
  AutoscaleState st;
  absl::Time t = kT0;
  DecideReplicas(p, At(t, 0, 3, 1, 0, 0.5), st, t);  // last busy at t
  Decision d;
  for (int i = 0; i < 119; ++i) {  // 9 min 55 s of silence
    t += absl::Seconds(5);
    d = DecideReplicas(p, At(t, 0, 0, 1, 0, 0.0), st, t);
    ASSERT_EQ(d.replicas, 1) << i << " " << d.reason;
  }
  t += absl::Seconds(5);
  d = DecideReplicas(p, At(t, 0, 0, 1, 0, 0.0), st, t);
  EXPECT_EQ(d.replicas, 0) << d.reason;
  // Stays at zero while nothing arrives; one waiting request activates.
  t += absl::Seconds(5);
  EXPECT_EQ(DecideReplicas(p, At(t, 0, 0, 0), st, t).replicas, 0);
  t += absl::Seconds(5);
  d = DecideReplicas(p, At(t, 1, 0, 0), st, t);
  EXPECT_EQ(d.replicas, 1) << d.reason;
  EXPECT_THAT(d.reason, HasSubstr("activation"));
}

// Short requests now and then show none running at almost every sample; the completion rate
// sees each of them, so the service is not idle while it completes requests. A stale rate
// says nothing, and once the rate is 0 the idle clock runs.
TEST(AutoscalePolicy, RequestsCompletedLatelyKeepTheIdleClockFromRunning) {
  AutoscalePolicy p;  // idleTimeout 10m, staleAfter 60s
  p.activation_threshold = 0;
  AutoscaleState st;
  absl::Time t = kT0;
  DecideReplicas(p, At(t, 0, 1, 1), st, t);
  auto quiet = [&](absl::Time at, std::optional<double> completed, absl::Time rate_at) {
    Signals s = At(at, 0, 0, 1, 0, 0.0);
    if (completed) s.throughput = Sample::At(*completed, rate_at);
    return DecideReplicas(p, s, st, at);
  };
  // 30 minutes of one request a minute, none running at any sample: held at one.
  for (int i = 0; i < 360; ++i) {
    t += absl::Seconds(5);
    Decision d = quiet(t, 1.0 / 60, t);
    ASSERT_EQ(d.replicas, 1) << i << " " << d.reason;
  }
  // The rate stops updating (Prometheus stopped answering for it): once older than staleAfter
  // it keeps nothing busy, and the idle clock runs from the last decision it was fresh at.
  const absl::Time last_rate = t;
  Decision d;
  while (t + absl::Seconds(5) < last_rate + p.stale_after + p.idle_timeout) {
    t += absl::Seconds(5);
    d = quiet(t, 1.0 / 60, last_rate);
    ASSERT_EQ(d.replicas, 1) << d.reason;
  }
  t += absl::Seconds(5);
  d = quiet(t, 1.0 / 60, last_rate);
  EXPECT_EQ(d.replicas, 0) << d.reason;
  // Zero idleTimeout after the last fresh rate, as the message says.
  EXPECT_EQ(t, last_rate + p.stale_after + p.idle_timeout);
  EXPECT_THAT(d.reason, HasSubstr("no request waiting, running or completed for 10m"));
  // The same with a fresh rate of 0: idle, to zero after idleTimeout.
  AutoscaleState fresh;
  st = fresh;
  t = kT0;
  DecideReplicas(p, At(t, 0, 1, 1), st, t);
  for (int i = 0; i < 119; ++i) {
    t += absl::Seconds(5);
    ASSERT_EQ(quiet(t, 0.0, t).replicas, 1) << i;
  }
  t += absl::Seconds(5);
  EXPECT_EQ(quiet(t, 0.0, t).replicas, 0);
}

TEST(AutoscalePolicy, AWakeUpsBacklogHoldsNoReplicaOnceItIsServed) {
  AutoscalePolicy p;  // 10-minute window, 60 s cold start, steps +max(4, 100%), -max(2, 25%)
  p.trend_window = absl::ZeroDuration();  // no projection: the queue rule alone
  AutoscaleState st;
  absl::Time t = kT0;
  EXPECT_EQ(DecideReplicas(p, At(t, 0, 0, 0), st, t).replicas, 0);
  // A wake-up: requests wait while the replicas start, nothing serves them; the batch is not
  // known, so the queue asks for a replica per 4 waiting: 1, then 5, 10, 20.
  int replicas = 0;
  for (double waiting : {2.0, 20.0, 40.0, 80.0}) {
    t += absl::Seconds(15);
    replicas = DecideReplicas(p, At(t, waiting, 0, 0, replicas), st, t).replicas;
  }
  EXPECT_EQ(replicas, 20);
  // Still none ready and the queue asks for fewer (8 waiting: 2): the replicas starting are
  // kept, since nothing has shown yet what they serve.
  t += absl::Seconds(15);
  Decision starting = DecideReplicas(p, At(t, 8, 0, 0, replicas), st, t);
  EXPECT_EQ(starting.replicas, 20) << starting.reason;
  EXPECT_THAT(starting.reason, HasSubstr("none ready yet"));
  // Ready: the backlog is in their batches at once and a trickle remains (3 running in all).
  // The queue asks for 1, the utilisation rule for ceil(0.05 x 20 / 0.75) = 2; the
  // recommendations made before any replica was ready are not held for the window, so the
  // count steps down at once, by max(2, 25%) a decision, to the 2 that the window then holds.
  std::vector<int> seen;
  for (int i = 0; i < 8; ++i) {
    t += absl::Seconds(15);
    Decision d = DecideReplicas(p, At(t, 0, 3, replicas, 0, 0.05), st, t);
    replicas = d.replicas;
    seen.push_back(replicas);
  }
  EXPECT_THAT(seen, ::testing::ElementsAre(15, 11, 8, 6, 4, 2, 2, 2));
  // While replicas serve, the window holds as before: a burst that waits with 2 ready (32
  // each) asks for (40 + 64) / (32 + 4) = 3, the utilisation rule for 1.0 x 2 / 0.75 = 3; a
  // lull right after it keeps them for the window.
  t += absl::Seconds(15);
  Decision d = DecideReplicas(p, At(t, 40, 64, 2, 0, 1.0), st, t);
  EXPECT_EQ(d.replicas, 3) << d.reason;
  ExpectHeldFor(p, st, t, absl::Minutes(9), 0, 3, 3, 0.05, 3);
}

TEST(AutoscalePolicy, ActivationThresholdIsStrict) {
  AutoscalePolicy p;
  p.activation_threshold = 3;
  AutoscaleState st;
  EXPECT_EQ(DecideReplicas(p, At(kT0, 3, 0, 0), st, kT0).replicas, 0);
  EXPECT_EQ(
      DecideReplicas(p, At(kT0 + absl::Seconds(5), 4, 0, 0), st, kT0 + absl::Seconds(5)).replicas,
      1);
}

TEST(AutoscalePolicy, WarmBaselineIsKept) {
  AutoscalePolicy p;
  p.min_replicas = 2;
  p.idle_timeout = absl::ZeroDuration();
  p.scale_down_window = absl::ZeroDuration();
  AutoscaleState st;
  absl::Time t = kT0;
  for (int i = 0; i < 50; ++i, t += absl::Seconds(5)) {
    EXPECT_EQ(DecideReplicas(p, At(t, 0, 0, 2), st, t).replicas, 2);
  }
}

TEST(AutoscalePolicy, MissingOrStaleDataNeverLowersNorZeroes) {
  AutoscalePolicy p;
  p.stale_after = absl::Seconds(30);
  AutoscaleState st = RunningAt(5);
  Signals s = At(kT0, 0, 0, 5);
  s.waiting.present = false;
  Decision d = DecideReplicas(p, s, st, kT0);
  EXPECT_EQ(d.replicas, 5);
  EXPECT_FALSE(d.data_ok);
  EXPECT_THAT(d.reason, HasSubstr("waiting"));
  // Stale: sampled 31 s ago.
  d = DecideReplicas(p, At(kT0 - absl::Seconds(31), 0, 0, 5), st, kT0);
  EXPECT_EQ(d.replicas, 5);
  EXPECT_FALSE(d.data_ok);
  // NaN is missing too.
  s = At(kT0, std::nan(""), 0, 5);
  EXPECT_FALSE(DecideReplicas(p, s, st, kT0).data_ok);
  // At zero with no data: one replica, since demand is unknown.
  AutoscaleState zero;
  zero.initialised = true;
  Signals none;
  d = DecideReplicas(p, none, zero, kT0);
  EXPECT_EQ(d.replicas, 1);
}

TEST(AutoscalePolicy, RisingDemandIsProjectedOneColdStartAhead) {
  AutoscalePolicy p;
  p.cold_start = absl::Seconds(60);
  p.trend_window = absl::Seconds(60);
  p.scale_up_step = 100;
  AutoscaleState flat, rising;
  absl::Time t = kT0;
  Decision df, dr;
  for (int i = 0; i <= 12; ++i, t += absl::Seconds(5)) {
    // Both saturated at 16 per replica; one holds 40 waiting, the other grows 2 per second.
    df = DecideReplicas(p, At(t, 40, 64, 4), flat, t);
    dr = DecideReplicas(p, At(t, 10 * i, 64, 4), rising, t);
  }
  EXPECT_EQ(df.replicas, 6) << df.reason;  // (40 + 64) / 20
  // 120 waiting + 64 running now, +2/s for 60 s: 304 -> 16 replicas.
  EXPECT_GE(dr.replicas, 15) << dr.reason;
  EXPECT_THAT(dr.reason, HasSubstr("projected"));
}

TEST(AutoscalePolicy, MaxReplicasCaps) {
  AutoscalePolicy p;
  p.max_replicas = 3;
  p.scale_up_step = 100;
  AutoscaleState st;
  EXPECT_EQ(DecideReplicas(p, At(kT0, 1000, 10, 1), st, kT0).replicas, 3);
}

TEST(AutoscalePolicy, ARestartedScalerStartsFromTheReplicasThereAndHoldsThemForAWindow) {
  // A scaler (re)started next to a service at 20 replicas in a lull: the history of what it
  // recommended is gone, so nothing is released before one scale-down window has passed.
  AutoscalePolicy p;
  p.scale_down_window = absl::Minutes(3);
  AutoscaleState st;
  absl::Time t = kT0;
  Decision d = DecideReplicas(p, At(t, 0, 8, 20, 0, 0.05), st, t);
  EXPECT_EQ(d.replicas, 20) << d.reason;
  t = ExpectHeldFor(p, st, t, absl::Minutes(3), 0, 8, 20, 0.05, 20);
  t += absl::Seconds(5);
  EXPECT_LT(DecideReplicas(p, At(t, 0, 8, 20, 0, 0.05), st, t).replicas, 20);

  // Started while Prometheus is unreachable: held (KEDA's fallback applies), and once data
  // arrives the decisions start from the 20 replicas found, not from the one it held at.
  AutoscaleState blind;
  t = kT0;
  Signals none;
  d = DecideReplicas(p, none, blind, t);
  EXPECT_FALSE(d.data_ok);
  t += absl::Seconds(30);
  d = DecideReplicas(p, At(t, 30, 160, 20, 0, 0.95), blind, t);
  EXPECT_TRUE(d.data_ok);
  EXPECT_GE(d.replicas, 20) << d.reason;
}

// Recurring load: a batch job that brings 10 busy replicas' worth of requests from minute 30 to
// 39 of each hour to a service that otherwise runs 2 requests on one replica (a third of a
// replica busy). Decisions every 15 s; `burst_hours` says in which hours the job runs.
struct HourlyJob {
  std::vector<bool> burst_hours;
  static bool InBurst(absl::Duration into_hour) {
    return into_hour >= absl::Minutes(30) && into_hour < absl::Minutes(40);
  }
  Signals SignalsAt(absl::Time t) const {
    absl::Duration since = t - kT0;
    int hour = static_cast<int>(since / absl::Hours(1));
    bool burst = hour < static_cast<int>(burst_hours.size()) && burst_hours[hour] &&
                 InBurst(since - hour * absl::Hours(1));
    return burst ? At(t, 0, 200, 10, 0, 1.0) : At(t, 0, 2, 1, 0, 0.2);
  }
  // Runs the decisions from kT0 up to (not including) `end`; returns the decisions made at or
  // after `from`, with their times.
  std::vector<std::pair<absl::Time, Decision>> Run(const AutoscalePolicy& p, AutoscaleState& st,
                                                   absl::Duration from, absl::Duration end) const {
    std::vector<std::pair<absl::Time, Decision>> out;
    for (absl::Time t = kT0; t < kT0 + end; t += absl::Seconds(15)) {
      Decision d = DecideReplicas(p, SignalsAt(t), st, t);
      if (t >= kT0 + from) out.emplace_back(t, d);
    }
    return out;
  }
};

TEST(AutoscalePolicy, ALoadThatRecursEachHourIsStartedAColdStartAhead) {
  AutoscalePolicy p;  // seasonalPeriods 1h, 24h; seasonalRepeats 3; coldStart 60s
  AutoscaleState st;
  HourlyJob job{{true, true, true, true}};
  auto hour3 =
      job.Run(p, st, absl::Hours(3) + absl::Minutes(20), absl::Hours(3) + absl::Minutes(30));
  // The first decision that starts replicas for it: within the lead (the 60 s cold start rounded
  // up to minutes, plus one: 2 minutes, plus the minute's alignment) before minute 30, not earlier.
  absl::Time first = absl::InfiniteFuture();
  for (const auto& [t, d] : hour3) {
    if (absl::StrContains(d.reason, "recurring")) {
      first = std::min(first, t);
      EXPECT_GT(d.replicas, 1) << d.reason;
    }
  }
  ASSERT_NE(first, absl::InfiniteFuture()) << "no decision started the hourly job's replicas";
  EXPECT_GE(first, kT0 + absl::Hours(3) + absl::Minutes(27)) << absl::FormatTime(first);
  const Decision& last = hour3.back().second;  // just before minute 30
  EXPECT_THAT(last.reason, HasSubstr("recurring: 10.0 replicas busy within 2m of this time in "
                                     "each of the last 3 periods of 1h"));
  // Sized to the target utilisation (10 / 0.75 -> 14), within the scale-up steps (1 -> 5 -> 10
  // -> 14 at 100% a step).
  EXPECT_EQ(last.replicas, 14) << last.reason;
}

TEST(AutoscalePolicy, ARecurringLoadNeedsEveryOneOfTheLastRepeats) {
  AutoscalePolicy p;
  // Two hours of history are not three.
  AutoscaleState two;
  for (const auto& [t, d] : HourlyJob{{true, true, true}}.Run(p, two, absl::Hours(2),
                                                              absl::Hours(2) + absl::Minutes(30))) {
    EXPECT_THAT(d.reason, Not(HasSubstr("recurring"))) << absl::FormatTime(t);
  }
  // A missed hour among the last three: nothing in hour 3 either.
  AutoscaleState missed;
  for (const auto& [t, d] : HourlyJob{{true, false, true, true}}.Run(
           p, missed, absl::Hours(3), absl::Hours(3) + absl::Minutes(30))) {
    EXPECT_THAT(d.reason, Not(HasSubstr("recurring"))) << absl::FormatTime(t);
  }
  // Off: an empty seasonalPeriods.
  p.seasonal_periods.clear();
  AutoscaleState off;
  for (const auto& [t, d] : HourlyJob{{true, true, true, true}}.Run(
           p, off, absl::Hours(3), absl::Hours(3) + absl::Minutes(30))) {
    EXPECT_THAT(d.reason, Not(HasSubstr("recurring"))) << absl::FormatTime(t);
  }
}

TEST(AutoscalePolicy, ARecurringLoadThatDoesNotComeHoldsNothingOnceItsTimeHasPassed) {
  // Hour 3 without the job: replicas start ahead of minute 30 as before, but once the load at
  // this time is below what it was then, the rule stops (the scale-down window then releases
  // them), instead of holding them through the job's usual ten minutes.
  AutoscalePolicy p;
  AutoscaleState st;
  auto hour3 = HourlyJob{{true, true, true, false}}.Run(p, st, absl::Hours(3) + absl::Minutes(29),
                                                        absl::Hours(3) + absl::Minutes(45));
  bool started = false;
  for (const auto& [t, d] : hour3) {
    bool recurring = absl::StrContains(d.reason, "recurring");
    if (t < kT0 + absl::Hours(3) + absl::Minutes(30)) started |= recurring;
    if (t >= kT0 + absl::Hours(3) + absl::Minutes(31)) {
      EXPECT_FALSE(recurring) << absl::FormatTime(t) << " " << d.reason;
    }
  }
  EXPECT_TRUE(started);
}

TEST(AutoscalePolicy, ASteadyLoadDecidesTheSameWithTheSeasonalRule) {
  // Four hours of a load that wanders between 1 and 4 busy replicas the same way each hour: every
  // level recurs, none beyond what the rules already hold, so the rule changes no decision.
  AutoscalePolicy on, off;
  off.seasonal_periods.clear();
  AutoscaleState a, b;
  for (absl::Time t = kT0; t < kT0 + absl::Hours(4); t += absl::Seconds(15)) {
    double minute = absl::ToDoubleMinutes(t - kT0);
    double util = 0.5 + 0.3 * std::sin(minute / 7);
    double ready = std::max(1, a.current);
    Signals s = At(t, 0, 20 * util * ready, ready, 0, util);
    Decision da = DecideReplicas(on, s, a, t), db = DecideReplicas(off, s, b, t);
    ASSERT_EQ(da.replicas, db.replicas) << absl::FormatTime(t) << " " << da.reason;
    ASSERT_EQ(da.reason, db.reason) << absl::FormatTime(t);
  }
}

TEST(AutoscalePolicy, ARestartedScalerMeetsARecurringLoadWithItsHistoryReplayed) {
  // The scaler restarts at 3h20m: its new state has no history, and the job at 3h30m meets one
  // replica. With the first 3h20m replayed (as Scaler::Backfill replays Prometheus' range
  // queries) and merged, it is started ahead as if nothing had restarted; likewise when the
  // merge comes after the new process has polled for ten minutes.
  AutoscalePolicy p;
  HourlyJob job{{true, true, true, true}};
  const absl::Time restart = kT0 + absl::Hours(3) + absl::Minutes(10);
  AutoscaleState past;
  job.Run(p, past, absl::ZeroDuration(), restart - kT0);
  auto live_run = [&](AutoscaleState& st, absl::Time from, absl::Time end) {
    Decision last;
    bool recurring = false;
    for (absl::Time t = from; t < end; t += absl::Seconds(15)) {
      last = DecideReplicas(p, job.SignalsAt(t), st, t);
      recurring |= absl::StrContains(last.reason, "recurring");
    }
    return std::pair{last, recurring};
  };
  const absl::Time before_job = kT0 + absl::Hours(3) + absl::Minutes(30);

  AutoscaleState bare;
  EXPECT_FALSE(live_run(bare, restart, before_job).second);

  AutoscaleState merged_first;
  MergeHistory(p, past, merged_first);
  auto [last, recurring] = live_run(merged_first, restart, before_job);
  EXPECT_TRUE(recurring);
  EXPECT_EQ(last.replicas, 14) << last.reason;

  AutoscaleState merged_later;
  live_run(merged_later, restart, restart + absl::Minutes(10));
  MergeHistory(p, past, merged_later);
  std::tie(last, recurring) = live_run(merged_later, restart + absl::Minutes(10), before_job);
  EXPECT_TRUE(recurring);
  EXPECT_EQ(last.replicas, 14) << last.reason;
  EXPECT_EQ(merged_later.first_minute, past.first_minute);

  // A history kept under other knobs (another ring) is taken into this policy's ring: its latest
  // 183 minutes (1h x 3, the lead and a minute), which meet the job under the hourly rule.
  AutoscalePolicy hourly = p;
  hourly.seasonal_periods = {absl::Hours(1)};
  AutoscaleState other;
  MergeHistory(hourly, past, other);
  EXPECT_EQ(other.load_by_minute.size(), 183u);
  EXPECT_EQ(other.last_minute, past.last_minute);
  EXPECT_EQ(other.first_minute, past.last_minute - 182);
  for (absl::Time t = restart; t < before_job; t += absl::Seconds(15)) {
    last = DecideReplicas(hourly, job.SignalsAt(t), other, t);
  }
  EXPECT_THAT(last.reason, HasSubstr("recurring: 10.0 replicas busy within 2m of this time in "
                                     "each of the last 3 periods of 1h"));
  EXPECT_EQ(last.replicas, 14) << last.reason;
}

// A change of knobs that reshapes the seasonal rule's ring (a scaler's config reload: coldStart
// sets its lead, seasonalPeriods x seasonalRepeats its span) keeps the load seen under the old
// ones, as far as it fits the new span: the hourly job is still met ahead, with the new lead.
// Before 2026-12-07 such a change started the history afresh, and the job met one replica
// until three hours had been seen again.
TEST(AutoscalePolicy, AKnobChangeKeepsTheLoadHistoryThatFitsItsNewSpan) {
  HourlyJob job{{true, true, true, true}};
  const absl::Time change = kT0 + absl::Hours(3) + absl::Minutes(20);
  const absl::Time before_job = kT0 + absl::Hours(3) + absl::Minutes(30);
  AutoscalePolicy was;  // 1h and 24h, 3 repeats, coldStart 60s: a ring of 72h3m
  auto decide_from_change = [&](const AutoscalePolicy& now_policy) {
    AutoscaleState st;
    job.Run(was, st, absl::ZeroDuration(), change - kT0);
    const int64_t first = st.first_minute;
    Decision last;
    for (absl::Time t = change; t < before_job; t += absl::Seconds(15)) {
      last = DecideReplicas(now_policy, job.SignalsAt(t), st, t);
    }
    EXPECT_EQ(static_cast<int64_t>(st.load_by_minute.size()),
              SeasonalHistory(now_policy) / absl::Minutes(1));
    return std::tuple{last, st, first};
  };

  // A longer cold start: a lead of 3 minutes, a ring a minute longer; everything seen is kept.
  AutoscalePolicy slower = was;
  slower.cold_start = absl::Minutes(2);
  auto [last, st, first] = decide_from_change(slower);
  EXPECT_THAT(last.reason, HasSubstr("recurring: 10.0 replicas busy within 3m of this time in "
                                     "each of the last 3 periods of 1h"));
  EXPECT_EQ(last.replicas, 14) << last.reason;
  EXPECT_EQ(st.first_minute, first);

  // The daily period dropped: a ring of 3h3m keeps the latest 183 minutes.
  AutoscalePolicy hourly = was;
  hourly.seasonal_periods = {absl::Hours(1)};
  std::tie(last, st, first) = decide_from_change(hourly);
  EXPECT_THAT(last.reason, HasSubstr("recurring: 10.0 replicas busy within 2m"));
  EXPECT_EQ(last.replicas, 14) << last.reason;
  EXPECT_EQ(st.first_minute, st.last_minute - 182);  // the earlier minutes were let go
  EXPECT_GT(st.first_minute, first);

  // Four repeats: the 3h29m kept are not four hours; the rule waits for them (or a rebuild).
  AutoscalePolicy four = was;
  four.seasonal_repeats = 4;
  std::tie(last, st, first) = decide_from_change(four);
  EXPECT_THAT(last.reason, Not(HasSubstr("recurring"))) << last.reason;
  EXPECT_EQ(last.replicas, 1) << last.reason;
  EXPECT_EQ(st.first_minute, first);
}

TEST(AutoscalePolicy, MergedHistoryKeepsTheLeastOfAMinuteBothSawAndWhatLiveCannotReach) {
  // One period of 1h, one repeat, a 60 s cold start: a ring of 60 + 2 + 1 = 63 minutes.
  AutoscalePolicy p;
  p.seasonal_periods = {absl::Hours(1)};
  p.seasonal_repeats = 1;
  ASSERT_EQ(SeasonalHistory(p), absl::Minutes(63));
  auto slot = [](AutoscaleState& st, int64_t minute) -> double& {
    return st.load_by_minute[static_cast<size_t>(minute % 63)];
  };
  AutoscaleState past, live;
  past.load_by_minute.assign(63, 0);
  past.first_minute = 1000;
  past.last_minute = 1062;
  for (int64_t m = 1000; m <= 1062; ++m) slot(past, m) = 5;
  live.load_by_minute.assign(63, 0);
  live.first_minute = 1060;
  live.last_minute = 1070;
  for (int64_t m = 1060; m <= 1070; ++m) slot(live, m) = m == 1060 ? 3 : 7;
  MergeHistory(p, past, live);
  EXPECT_EQ(live.first_minute, 1008);  // 1070 - 63 + 1: the minutes before are out of reach
  EXPECT_EQ(live.last_minute, 1070);
  EXPECT_EQ(slot(live, 1008), 5);  // only the past saw it
  EXPECT_EQ(slot(live, 1059), 5);
  EXPECT_EQ(slot(live, 1060), 3);  // both: the lesser
  EXPECT_EQ(slot(live, 1061), 5);
  EXPECT_EQ(slot(live, 1063), 7);  // only live saw it
  EXPECT_EQ(slot(live, 1070), 7);
  // A past entirely out of reach adds nothing.
  AutoscaleState later = live;
  later.first_minute = 1200;
  later.last_minute = 1200;
  MergeHistory(p, past, later);
  EXPECT_EQ(later.first_minute, 1200);
}

// MergeLoadHistory takes the past's per-minute load as MergeHistory does, and nothing else: a
// service that kept deciding through a change of knobs keeps its own window, idle clock, trend
// and batch, where MergeHistory would carry the past's (its last fresh decision is within
// staleAfter of the live one's start).
TEST(AutoscalePolicy, MergingTheLoadHistoryAloneLeavesTheRestOfTheStateAsItWas) {
  AutoscalePolicy p;
  p.seasonal_periods = {absl::Hours(1)};
  p.seasonal_repeats = 1;
  AutoscaleState past;
  DecideReplicas(p, At(kT0, 40, 200, 10), past, kT0);  // a batch of 20 seen, 14 recommended
  ASSERT_EQ(past.batch_per_replica, 20);
  ASSERT_FALSE(past.recommendations.empty());
  AutoscaleState live;
  DecideReplicas(p, At(kT0 + absl::Seconds(5), 0, 2, 1), live, kT0 + absl::Seconds(5));
  const auto recommendations = live.recommendations;
  const auto demand = live.demand;
  AutoscaleState whole = live;
  EXPECT_TRUE(MergeHistory(p, past, whole));
  EXPECT_EQ(whole.batch_per_replica, 20);
  EXPECT_GT(whole.recommendations.size(), recommendations.size());
  MergeLoadHistory(p, past, live);
  EXPECT_EQ(live.batch_per_replica, 0);
  EXPECT_EQ(live.recommendations, recommendations);
  EXPECT_EQ(live.demand, demand);
  // The load: the minute both saw holds the lesser, as MergeHistory leaves it.
  EXPECT_EQ(live.load_by_minute, whole.load_by_minute);
  EXPECT_EQ(live.first_minute, whole.first_minute);
}

TEST(AutoscalePolicy, ARestartedScalerKeepsTheBatchItsHistoryShowed) {
  // A service that wakes from zero to 12 waiting requests. It has shown that a replica runs 35 at
  // once (35 running on one replica with requests waiting): 12 waiting fit one replica. A
  // scaler that lost that asks for a replica per 4 waiting (3), then more as the queue grows
  // while they start; one whose history was replayed and merged holds at one. Also with the
  // seasonal rule off: the batch is not the rule's.
  for (bool seasonal : {true, false}) {
    AutoscalePolicy p;
    if (!seasonal) p.seasonal_periods.clear();
    AutoscaleState past;
    DecideReplicas(p, At(kT0, 10, 35, 1), past, kT0);
    ASSERT_EQ(past.batch_per_replica, 35);
    const absl::Time later = kT0 + absl::Hours(5);
    for (bool merged : {true, false}) {
      AutoscaleState live;
      if (merged) MergeHistory(p, past, live);
      DecideReplicas(p, At(later, 0, 0, 0), live, later);  // at zero
      const Decision d = DecideReplicas(p, At(later + absl::Seconds(15), 12, 0, 0), live,
                                        later + absl::Seconds(15));
      EXPECT_EQ(d.replicas, merged ? 1 : 3) << d.reason;
    }
    // A batch the live state has learned is its own.
    AutoscaleState learned;
    DecideReplicas(p, At(later, 5, 20, 1), learned, later);
    MergeHistory(p, past, learned);
    EXPECT_EQ(learned.batch_per_replica, 20);
  }
}

// A restart otherwise resets the scale-down window (the replicas found are held for a whole
// window) and the idle clock (a service idle for minutes waits a whole idleTimeout more). With
// the history just before the restart merged, the restarted scaler decides as if it had never
// stopped, whether the merge comes before its first decision (the simulator) or after it (the
// scaler's backfill runs beside the first polls); a history that ends earlier than staleAfter
// before the start carries neither over.
TEST(AutoscalePolicy, ARestartedScalerKeepsItsWindowAndIdleClockFromTheHistoryBeforeIt) {
  AutoscalePolicy p;  // window 10m, idleTimeout 10m, staleAfter 60s
  // Busy on 20 replicas (utilisation in band) until 10m, then a lull (a replica's tenth busy).
  auto lull = [](absl::Time t) {
    return t < kT0 + absl::Minutes(10) ? At(t, 0, 100, 20, 0, 0.75) : At(t, 0, 10, 20, 0, 0.075);
  };
  // One replica running 2 requests until 10m, then idle.
  auto idle = [](absl::Time t) {
    return t < kT0 + absl::Minutes(10) ? At(t, 0, 2, 1, 0, 0.2) : At(t, 0, 0, 1, 0, 0.0);
  };
  // Decisions every 5 s over [from, to).
  auto run = [&p](const auto& load, AutoscaleState& st, absl::Time from, absl::Time to) {
    std::vector<int> out;
    for (absl::Time t = from; t < to; t += absl::Seconds(5)) {
      out.push_back(DecideReplicas(p, load(t), st, t).replicas);
    }
    return out;
  };
  const absl::Time restart = kT0 + absl::Minutes(15), end = kT0 + absl::Minutes(30);
  // When decisions every 5 s from `from` first went below n.
  auto first_below = [](const std::vector<int>& r, int n, absl::Time from) {
    for (size_t i = 0; i < r.size(); ++i) {
      if (r[i] < n) return from + static_cast<int64_t>(i) * absl::Seconds(5);
    }
    return absl::InfiniteFuture();
  };
  // The window keeps a recommendation while it is at most 10m old (the last busy one, at
  // 9m55s, goes at 20m); idleTimeout releases once the last busy decision is 10m old (19m55s).
  // A restart's hold, from 15m, goes at 25m05s; its idle clock, from 15m, at 25m.
  const absl::Duration five = absl::Seconds(5);
  for (const auto& [name, load, held, released, bare_released] :
       {std::tuple{"lull", std::function<Signals(absl::Time)>(lull), 20, kT0 + absl::Minutes(20),
                   restart + absl::Minutes(10) + five},
        std::tuple{"idle", std::function<Signals(absl::Time)>(idle), 1,
                   kT0 + absl::Minutes(20) - five, restart + absl::Minutes(10)}}) {
    SCOPED_TRACE(name);
    AutoscaleState never;
    run(load, never, kT0, restart);
    const AutoscaleState past = never;  // what the backfill replays up to the restart
    const std::vector<int> expected = run(load, never, restart, end);
    EXPECT_EQ(first_below(expected, held, restart), released);

    AutoscaleState bare;
    EXPECT_EQ(first_below(run(load, bare, restart, end), held, restart), bare_released);

    AutoscaleState merged_first;
    EXPECT_TRUE(MergeHistory(p, past, merged_first));
    EXPECT_EQ(run(load, merged_first, restart, end), expected);

    AutoscaleState merged_later;
    std::vector<int> got = run(load, merged_later, restart, restart + absl::Seconds(10));
    EXPECT_TRUE(MergeHistory(p, past, merged_later));
    const std::vector<int> rest = run(load, merged_later, restart + absl::Seconds(10), end);
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_EQ(got, expected);

    // A history that ends two minutes before the start (Prometheus was down) carries neither:
    // merged before the first decision, that decision drops them; after it, the merge does.
    AutoscaleState gap;
    AutoscaleState old_past;
    run(load, old_past, kT0, restart - absl::Minutes(2));
    MergeHistory(p, old_past, gap);
    EXPECT_EQ(first_below(run(load, gap, restart, end), held, restart), bare_released);
    AutoscaleState gap_later;
    run(load, gap_later, restart, restart + 2 * five);
    EXPECT_FALSE(MergeHistory(p, old_past, gap_later));
    EXPECT_EQ(first_below(run(load, gap_later, restart + 2 * five, end), held, restart + 2 * five),
              bare_released);
  }

  // Demand the restarted scaler has seen itself keeps its own idle clock.
  AutoscaleState past;
  run(idle, past, kT0, restart);
  AutoscaleState live;
  DecideReplicas(p, At(restart, 0, 3, 1, 0, 0.3), live, restart);  // busy at the restart
  EXPECT_TRUE(MergeHistory(p, past, live));
  EXPECT_EQ(live.last_busy, restart);
  EXPECT_EQ(
      first_below(run(idle, live, restart + absl::Seconds(5), end), 1, restart + absl::Seconds(5)),
      restart + absl::Minutes(10));
}

TEST(AutoscalePolicy, ARestartedScalerKeepsTheDemandTrendAndTheLastQueueFromTheHistoryBeforeIt) {
  AutoscalePolicy p;  // trendWindow 60s, coldStart 60s, staleAfter 60s
  const absl::Time restart = kT0 + absl::Minutes(13), end = kT0 + absl::Minutes(15);
  // Rising: 4 replicas running full batches of 8, and from 12m a queue growing by 2 every 5 s.
  auto rising = [](absl::Time t) {
    const double w = std::max(0.0, absl::ToDoubleSeconds(t - kT0 - absl::Minutes(12)) / 2.5);
    return At(t, w, 32, 4);
  };
  // Draining: a backlog of 150 at 10m on 4 replicas running batches of 8 scales to 8 (4 more
  // ready at 11m); it then falls by 2 every 5 s at 40 completions a second, so it drains within a
  // cold start and adds no replica.
  auto draining = [](absl::Time t) {
    const double since = absl::ToDoubleSeconds(t - kT0 - absl::Minutes(10));
    const double waiting = since < 0 ? 0 : std::max(0.0, 150 - since / 2.5);
    Signals s = since < 60 ? At(t, waiting, 32, 4, since < 0 ? 0 : 4) : At(t, waiting, 64, 8);
    s.throughput = Sample::At(40, t);
    return s;
  };
  auto run = [&p](const auto& load, AutoscaleState& st, absl::Time from, absl::Time to) {
    std::vector<int> out;
    for (absl::Time t = from; t < to; t += absl::Seconds(5)) {
      out.push_back(DecideReplicas(p, load(t), st, t).replicas);
    }
    return out;
  };
  for (const auto& [name, load] : {std::pair{"rising", std::function<Signals(absl::Time)>(rising)},
                                   {"draining", std::function<Signals(absl::Time)>(draining)}}) {
    SCOPED_TRACE(name);
    AutoscaleState never;
    run(load, never, kT0, restart);
    const AutoscaleState past = never;
    const std::vector<int> expected = run(load, never, restart, end);

    // Bare, the first decision sees no trend (one sample) and takes the backlog for a growing
    // one (the last queue seen is 0): it asks for more than the scaler that never restarted.
    AutoscaleState bare;
    const std::vector<int> got_bare = run(load, bare, restart, end);
    ASSERT_FALSE(got_bare.empty());
    EXPECT_NE(got_bare.front(), expected.front());

    AutoscaleState merged;
    EXPECT_TRUE(MergeHistory(p, past, merged));
    EXPECT_EQ(run(load, merged, restart, end), expected);

    // A history ending two minutes before the start carries no trend: as bare.
    AutoscaleState old_past;
    run(load, old_past, kT0, restart - absl::Minutes(2));
    AutoscaleState gap;
    MergeHistory(p, old_past, gap);
    EXPECT_EQ(run(load, gap, restart, end), got_bare);
  }
}

TEST(AutoscalePolicy, SeasonalKnobsAreChecked) {
  AutoscalePolicy p;
  p.seasonal_repeats = 0;
  EXPECT_THAT(p.Validate().message(), HasSubstr("seasonalRepeats"));
  p = AutoscalePolicy();
  p.seasonal_periods = {absl::Seconds(90)};
  EXPECT_THAT(p.Validate().message(), HasSubstr("seasonalPeriods"));
  p.seasonal_periods = {absl::Hours(24)};
  p.seasonal_repeats = 32;  // 32 days of history
  EXPECT_THAT(p.Validate().message(), HasSubstr("seasonalPeriods"));
  p.seasonal_repeats = 31;
  EXPECT_TRUE(p.Validate().ok());
}

}  // namespace
}  // namespace tessera::autoscale
