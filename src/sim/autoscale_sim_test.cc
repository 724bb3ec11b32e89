#include "sim/autoscale_sim.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "adapters/trace/llm_traces.h"
#include "base/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::sim {
namespace {

using ::testing::HasSubstr;

// Steady load: one request of 0.5 replica-seconds every 0.25 s for an hour = 2 replicas busy.
std::vector<SimRequest> Steady(double seconds, double gap, double work) {
  std::vector<SimRequest> out;
  for (double t = 0; t < seconds; t += gap) out.push_back({t, work, 0.001});
  return out;
}

PolicySpec Fixed(int replicas) {
  PolicySpec p;
  p.kind = "fixed";
  p.min_replicas = replicas;
  return p;
}

TEST(AutoscaleSim, MeanBusyReplicasIsTheMeasuredWorkOverTheMeasuredSpan) {
  // 0.5 replica-seconds every 0.25 s: 2 replicas' worth, whatever the warm-up.
  std::vector<SimRequest> steady = Steady(3600, 0.25, 0.5);
  EXPECT_NEAR(MeanBusyReplicas(steady, 0), 2.0, 0.001);
  EXPECT_NEAR(MeanBusyReplicas(steady, 600), 2.0, 0.001);
  // Three times the work in the last half hour: measured from then, 6.
  for (SimRequest& r : steady) r.work *= r.arrival >= 1800 ? 3 : 1;
  EXPECT_NEAR(MeanBusyReplicas(steady, 1800), 6.0, 0.01);
  EXPECT_NEAR(MeanBusyReplicas(steady, 0), 4.0, 0.01);
  EXPECT_EQ(MeanBusyReplicas({}, 0), 0);
  EXPECT_EQ(MeanBusyReplicas(steady, 3600), 0);  // nothing left to measure
}

TEST(AutoscaleSim, FixedProvisioningAccountsExactly) {
  ServingModel m;
  SimOptions o;
  PolicySpec fixed = Fixed(4);
  SimResult r = Simulate(Steady(3600, 0.25, 0.5), m, o, fixed);
  EXPECT_EQ(r.requests, 14400);
  EXPECT_NEAR(r.busy_gpu_hours, 2.0, 1e-6);  // 14,400 x 0.5 s
  EXPECT_NEAR(r.gpu_hours, 4.0, 0.01);       // 4 replicas for the hour
  EXPECT_NEAR(r.utilization, 0.5, 0.01);
  EXPECT_DOUBLE_EQ(r.slo_attainment, 1.0);  // twice the capacity needed
  EXPECT_EQ(r.cold_starts, 0);
  // Under-provisioned: the queue grows without bound and the SLO collapses.
  fixed.min_replicas = 1;
  r = Simulate(Steady(600, 0.25, 0.5), m, o, fixed);
  EXPECT_LT(r.slo_attainment, 0.1);
  EXPECT_GT(r.p99_wait_s, 200);
}

TEST(AutoscaleSim, WarmupDrivesThePolicyButIsNotMeasured) {
  ServingModel m;
  SimOptions o;
  o.warmup_s = 900;
  SimResult r = Simulate(Steady(3600, 0.25, 0.5), m, o, Fixed(4));
  EXPECT_EQ(r.requests, 10800);              // arrivals from 900 s on
  EXPECT_NEAR(r.busy_gpu_hours, 1.5, 1e-6);  // their work only
  EXPECT_NEAR(r.gpu_hours, 3.0, 0.01);       // 4 replicas for 45 minutes
  // A dynamic policy's first scale-up (from one replica) falls in the warm-up: not counted.
  PolicySpec tessera;
  tessera.kind = "tessera";
  SimResult cold = Simulate(Steady(3600, 0.25, 0.5), m, SimOptions(), tessera);
  SimResult warm = Simulate(Steady(3600, 0.25, 0.5), m, o, tessera);
  EXPECT_GT(cold.cold_starts, 0);
  EXPECT_LT(warm.cold_starts, cold.cold_starts);
  EXPECT_GE(warm.slo_attainment, cold.slo_attainment);
}

TEST(AutoscaleSim, TesseraFollowsASteadyLoadAndScalesToZeroWhenIdle) {
  ServingModel m;
  SimOptions o;
  o.cold_start_s = 30;
  PolicySpec t;
  t.kind = "tessera";
  t.tessera.cold_start = absl::Seconds(30);
  t.tessera.idle_timeout = absl::Minutes(2);
  // An hour of load needing 2 replicas, then 30 idle minutes, then a little more load.
  std::vector<SimRequest> reqs = Steady(3600, 0.25, 0.5);
  for (double s = 5400; s < 5460; s += 1) reqs.push_back({s, 0.5, 0.001});
  SimResult r = Simulate(reqs, m, o, t);
  EXPECT_GT(r.slo_attainment, 0.97) << r.slo_attainment;
  EXPECT_GT(r.utilization, 0.5) << r.utilization;
  // Target utilisation 0.75 holds 3 replicas for the 2 busy ones; scaled to zero in the gap,
  // so well under 3 replicas x 1.5 h.
  EXPECT_LT(r.gpu_hours, 3 * 1.5 * 0.85);
  EXPECT_GE(r.cold_starts, 2);  // up from one at the start, and back from zero
}

// The running scaler decides every pollInterval and each decision steps from its previous one,
// so within one 15 s HPA sync it compounds (1 -> 5 -> 10 -> 20), and the ScaledObject's HPA
// lets it through; one decision per sync steps from the replicas there (1 -> 5). A 5 s poll
// starts the replicas a burst needs sooner.
TEST(AutoscaleSim, AScalerPollingEvery5sCompoundsItsStepsWithinOneSync) {
  ServingModel m;
  m.max_batch = 1;  // one request per replica: the queue grows at once
  PolicySpec t;
  t.kind = "tessera";
  t.tessera.max_replicas = 20;
  // 40 s of 10 requests per second, each 4 replica-seconds: 40 replicas' worth, capped at 20.
  std::vector<SimRequest> burst = Steady(40, 0.1, 4.0);
  SimOptions per_sync;
  per_sync.cold_start_s = 20;
  SimOptions polled = per_sync;
  polled.scaler_poll_s = 5;
  SimResult a = Simulate(burst, m, per_sync, t);
  SimResult b = Simulate(burst, m, polled, t);
  // Measured: median wait 70.0 s per sync, 51.2 s polled; p99 89.9 s and 71.7 s.
  EXPECT_LT(b.p50_wait_s, a.p50_wait_s - 10);
  EXPECT_LT(b.p99_wait_s, a.p99_wait_s - 10);
  EXPECT_EQ(b.peak_replicas, 20);
  EXPECT_EQ(b.params.at("poll_interval_s"), 5);
  EXPECT_EQ(a.params.count("poll_interval_s"), 0u);
}

TEST(AutoscaleSim, EveryPolicyStartsAtItsFloorAndKeepsIt) {
  // A service with a floor of 5 has been running with 5 replicas: they are up at the start, so
  // a load that 2 replicas carry causes no cold start and never takes any policy below 5.
  ServingModel m;
  SimOptions o;
  for (const char* kind : {"tessera", "keda-queue", "hpa-cpu"}) {
    PolicySpec p;
    p.kind = kind;
    p.min_replicas = 5;
    p.tessera.min_replicas = 5;
    SimResult r = Simulate(Steady(1800, 0.25, 0.5), m, o, p);
    EXPECT_EQ(r.cold_starts, 0) << kind;
    EXPECT_NEAR(r.gpu_hours, 5 * 0.5, 0.01) << kind;
    EXPECT_EQ(r.peak_replicas, 5) << kind;
    EXPECT_EQ(r.slo_attainment, 1.0) << kind;
  }
}

TEST(AutoscaleSim, HpaCpuNeverScalesToZeroAndKedaQueueDoes) {
  ServingModel m;
  SimOptions o;
  std::vector<SimRequest> reqs = Steady(10, 1, 0.2);
  reqs.push_back({4000, 0.2, 0.001});
  PolicySpec hpa;
  hpa.kind = "hpa-cpu";
  PolicySpec keda;
  keda.kind = "keda-queue";
  SimResult h = Simulate(reqs, m, o, hpa);
  SimResult k = Simulate(reqs, m, o, keda);
  EXPECT_NEAR(h.gpu_hours, 4000.2 / 3600, 0.01);  // one replica throughout
  EXPECT_LT(k.gpu_hours, h.gpu_hours);            // zero between, after the cooldown
  EXPECT_GE(k.cold_starts, 1);
}

// A Prometheus outage through KEDA: tessera's decisions hold on missing data and GetMetrics
// answers UNAVAILABLE, so what the service gets is KEDA's fallback. A steady load that keeps 6
// replicas busy, 20 minutes of outage in the middle of the hour.
TEST(AutoscaleSim, AnOutageKeepsTheCountUnderCurrentReplicasIfHigherAndAStaticFallbackDropsIt) {
  ServingModel m;
  const std::vector<SimRequest> load = Steady(3600, 0.25, 1.5);
  SimOptions calm;
  calm.warmup_s = 600;  // measured from the steady state
  SimOptions down = calm;
  down.outages = {{1200, 1200}};
  auto with = [&](const std::string& fallback, const PolicySpec& p) {
    SimOptions o = down;
    o.fallback = *KedaFallback::Parse(fallback);
    return Simulate(load, m, o, p);
  };
  PolicySpec t;
  t.kind = "tessera";
  const SimResult before = Simulate(load, m, calm, t);
  ASSERT_GT(before.slo_attainment, 0.99);
  const SimResult none = with("none", t);
  const SimResult higher = with("replicas=2,behavior=currentReplicasIfHigher", t);
  const SimResult current = with("behavior=currentReplicas", t);
  const SimResult fixed = with("replicas=2,behavior=static", t);
  const SimResult lower = with("replicas=2,behavior=currentReplicasIfLower", t);
  // Held: the count the steady load had; nothing to scale for while the data is gone.
  EXPECT_GT(none.slo_attainment, 0.99);
  EXPECT_NEAR(none.gpu_hours, before.gpu_hours, 0.1 * before.gpu_hours);
  // Above the fallback's 2, the current count is what KEDA hands HPA: the same run as none.
  EXPECT_EQ(higher.gpu_hours, none.gpu_hours);
  EXPECT_EQ(higher.slo_attainment, none.slo_attainment);
  EXPECT_EQ(current.gpu_hours, none.gpu_hours);
  // Static 2 (KEDA's default behavior), or the lower of the two: 6 replicas' load on 2 for the
  // outage, and a backlog after it.
  EXPECT_LT(fixed.slo_attainment, 0.7) << fixed.slo_attainment;
  EXPECT_GT(fixed.cold_starts, none.cold_starts);
  EXPECT_EQ(lower.gpu_hours, fixed.gpu_hours);
  EXPECT_EQ(lower.slo_attainment, fixed.slo_attainment);
  // keda-queue is KEDA on Prometheus too: its static fallback drops it (after HPA's 5-minute
  // window); hpa-cpu reads the metrics server and does not see the outage.
  PolicySpec k;
  k.kind = "keda-queue";
  k.keda_target_queue = 1;
  k.min_replicas = 1;
  EXPECT_LT(with("replicas=2,behavior=static", k).slo_attainment,
            with("none", k).slo_attainment - 0.1);
  PolicySpec h;
  h.kind = "hpa-cpu";
  h.hpa_cpu_target = 0.01;
  const SimResult h_calm = Simulate(load, m, calm, h);
  const SimResult h_down = with("replicas=2,behavior=static", h);
  EXPECT_EQ(h_down.gpu_hours, h_calm.gpu_hours);
  EXPECT_EQ(h_down.slo_attainment, h_calm.slo_attainment);
}

// KEDA applies the fallback once more reads have failed in a row than failureThreshold: with
// HPA reading every 15 s and a threshold of 3, a static fallback in an outage over three reads
// does what no fallback does (HPA keeps the count), and in one over four it drops the count.
TEST(AutoscaleSim, TheFallbackWaitsForMoreFailedReadsThanItsThreshold) {
  ServingModel m;
  const std::vector<SimRequest> load = Steady(1800, 0.25, 1.5);
  PolicySpec t;
  t.kind = "tessera";
  auto run = [&](double length, const std::string& fallback) {
    SimOptions o;
    o.outages = {{901, length}};
    o.fallback = *KedaFallback::Parse(fallback);
    return Simulate(load, m, o, t);
  };
  const std::string fixed = "replicas=2,behavior=static,failureThreshold=3";
  // The reads at 915, 930 and 945 s fail.
  const SimResult three = run(44, fixed);
  EXPECT_EQ(three.gpu_hours, run(44, "none").gpu_hours);
  EXPECT_EQ(three.cold_starts, run(44, "none").cold_starts);
  // And the one at 960 s.
  const SimResult four = run(60, fixed);
  const SimResult held = run(60, "none");
  EXPECT_LT(four.slo_attainment, held.slo_attainment);
  EXPECT_GT(four.cold_starts, held.cold_starts);
  EXPECT_EQ(run(60, "replicas=2,behavior=static,failureThreshold=4").gpu_hours, held.gpu_hours);
}

// At zero, tessera's IsActive stays true on missing data (never to zero on data it does not
// have), so KEDA wakes the service, and currentReplicasIfHigher lifts it to the fallback's 2;
// keda-queue's failing trigger wakes nothing (kedacore/keda#7239), not even for a request that
// arrives in the outage.
// Ten seconds of requests, then one at 2,000 s, to a service tessera has taken to zero by then
// (idle timeout 2 minutes); runs end at 4,000 s.
struct AtZero {
  std::vector<SimRequest> reqs = [] {
    std::vector<SimRequest> r = Steady(10, 1, 0.2);
    r.push_back({2000, 0.2, 0.001});
    return r;
  }();
  SimOptions calm = [] {
    SimOptions o;
    o.end_s = 4000;
    return o;
  }();
  PolicySpec tessera = [] {
    PolicySpec p;
    p.kind = "tessera";
    p.tessera.idle_timeout = absl::Minutes(2);
    return p;
  }();
};

TEST(AutoscaleSim, AnOutageWakesTesseraFromZeroAndLeavesKedaQueueThere) {
  ServingModel m;
  const AtZero z;
  const std::vector<SimRequest>& reqs = z.reqs;
  const SimOptions& calm = z.calm;
  SimOptions down = calm;
  down.outages = {{1800, 600}};
  const PolicySpec& t = z.tessera;
  const SimResult t_calm = Simulate(reqs, m, calm, t);
  const SimResult t_down = Simulate(reqs, m, down, t);
  // Woken within a KEDA poll (1,810 s), 2 replicas from the fourth failed read (1,860 s) at
  // least to the outage's end (2,400 s), then down once the data is back and the idle timeout
  // has passed.
  EXPECT_GT(t_down.gpu_hours, 2 * 540 / 3600.0);
  EXPECT_LT(t_down.gpu_hours, t_calm.gpu_hours + 2 * 960 / 3600.0);
  EXPECT_EQ(t_down.peak_replicas, 2);
  down.fallback = *KedaFallback::Parse("replicas=1");
  EXPECT_EQ(Simulate(reqs, m, down, t).peak_replicas, 1);
  PolicySpec k;
  k.kind = "keda-queue";
  const SimResult k_calm = Simulate(reqs, m, calm, k);
  const SimResult k_down = Simulate(reqs, m, down, k);
  EXPECT_EQ(k_down.cold_starts, k_calm.cold_starts);
  // The request at 2,000 s (the longest wait): keda-queue wakes for it within a poll and a
  // cold start, or in the outage only once it ends (2,400 s); tessera likewise without the
  // outage, and in it, woken already, serves it at once.
  EXPECT_LT(k_calm.p99_wait_s, 100);
  EXPECT_GT(k_down.p99_wait_s, 400);
  EXPECT_GT(t_calm.p99_wait_s, 60);
  EXPECT_LT(t_down.p99_wait_s, 1);
}

// No scaler replica reachable (--scaler-outage): KEDA's fallback never counts
// (kedacore/keda#8056), so unlike a Prometheus outage nothing is raised to fallback.replicas and
// nothing wakes from zero: the request at 2,000 s waits for the span's end (2,400 s). HPA keeps
// the count it had, through a lull in which Tessera would have released replicas. keda-queue
// does not go through the scaler.
TEST(AutoscaleSim, AnUnreachableScalerGetsNoFallbackAndWakesNothing) {
  ServingModel m;
  const AtZero z;
  const std::vector<SimRequest>& reqs = z.reqs;
  const SimOptions& calm = z.calm;
  SimOptions prom_down = calm;
  prom_down.outages = {{1800, 600}};
  SimOptions scaler_down = calm;
  scaler_down.scaler_outages = {{1800, 600}};
  const PolicySpec& t = z.tessera;
  const SimResult t_calm = Simulate(reqs, m, calm, t);
  const SimResult t_prom = Simulate(reqs, m, prom_down, t);
  const SimResult t_gone = Simulate(reqs, m, scaler_down, t);
  EXPECT_EQ(t_prom.peak_replicas, 2);  // the fallback's 2, from the fourth failed read
  EXPECT_EQ(t_gone.peak_replicas, 1);
  EXPECT_LT(t_prom.p99_wait_s, 1);  // woken by IsActive, which stays true on missing data
  EXPECT_GT(t_gone.p99_wait_s, 400);
  EXPECT_EQ(t_gone.cold_starts, t_calm.cold_starts);  // the same wake-up, 400 s late

  // 20 minutes of load (10 replicas busy), then a lull from 1,200 s: Tessera releases its
  // replicas after its 2-minute window and goes to zero after the idle timeout; with the scaler
  // unreachable from 1,190 s to 2,390 s, HPA keeps them all, over 3 GPU-hours more (1.65 more
  // had HPA followed Tessera down, with only KEDA's count to zero stopped).
  std::vector<SimRequest> busy = Steady(1200, 0.05, 0.5);
  SimOptions lull_gone = calm;
  lull_gone.scaler_outages = {{1190, 1200}};
  PolicySpec quick = t;
  quick.tessera.scale_down_window = absl::Minutes(2);
  const SimResult b_calm = Simulate(busy, m, calm, quick);
  const SimResult b_gone = Simulate(busy, m, lull_gone, quick);
  EXPECT_GT(b_gone.gpu_hours, b_calm.gpu_hours + 3);

  PolicySpec k;
  k.kind = "keda-queue";
  EXPECT_EQ(Simulate(reqs, m, scaler_down, k).gpu_hours, Simulate(reqs, m, calm, k).gpu_hours);
  EXPECT_THAT(ParseOutages("5m", "--scaler-outage").status().message(),
              HasSubstr("--scaler-outage 5m: 5m: expected START+LENGTH"));
}

TEST(AutoscaleSim, OutagesAndFallbacksAreReadAsWrittenAndRefusedWithTheReason) {
  absl::StatusOr<std::vector<Outage>> o = ParseOutages("2h+5m,30m+10m");
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->size(), 2u);
  EXPECT_EQ((*o)[0].start_s, 1800);  // sorted by start
  EXPECT_EQ((*o)[0].length_s, 600);
  EXPECT_EQ((*o)[1].start_s, 7200);
  EXPECT_THAT(ParseOutages("30m").status().message(),
              HasSubstr("--outage 30m: 30m: expected START+LENGTH from the replay's start"));
  EXPECT_THAT(ParseOutages("30m+0s").status().message(), HasSubstr("LENGTH above 0"));
  EXPECT_THAT(ParseOutages("-1m+5m").status().message(), HasSubstr("expected START+LENGTH"));
  EXPECT_THAT(ParseOutages("10m+10m,15m+1m").status().message(), HasSubstr("two outages overlap"));
  EXPECT_TRUE(ParseOutages("10m+10m,20m+1m").ok());  // back to back

  absl::StatusOr<KedaFallback> f = KedaFallback::Parse("behavior=static");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->ToString(), "replicas=2,behavior=static,failureThreshold=3");
  EXPECT_EQ(f->Replicas(7), 2);
  f = KedaFallback::Parse("failureThreshold=1,replicas=4,behavior=currentReplicasIfLower");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->ToString(), "replicas=4,behavior=currentReplicasIfLower,failureThreshold=1");
  EXPECT_EQ(f->Replicas(7), 4);
  EXPECT_EQ(f->Replicas(3), 3);
  EXPECT_EQ(KedaFallback().Replicas(7), 7);  // currentReplicasIfHigher, 2
  EXPECT_EQ(KedaFallback().Replicas(1), 2);
  EXPECT_EQ(KedaFallback::Parse("none")->ToString(), "none");
  EXPECT_THAT(KedaFallback::Parse("behavior=higher").status().message(),
              HasSubstr("behavior=higher: expected static, currentReplicas, "
                        "currentReplicasIfHigher or currentReplicasIfLower"));
  EXPECT_THAT(KedaFallback::Parse("replicas=-1").status().message(),
              HasSubstr("replicas=-1: expected a count of 0 or more"));
  EXPECT_THAT(KedaFallback::Parse("failureThreshold=0").status().message(),
              HasSubstr("expected a count of 1 or more"));
  EXPECT_THAT(KedaFallback::Parse("replica=2").status().message(),
              HasSubstr("replica=2: expected none, or replicas=N"));
}

// A trace that ends after its last request (a ServeGen client idle for its last days) is
// measured to its end: what each policy keeps through the idle tail is paid for, as through an
// idle start. Ten minutes of load that keeps two replicas busy, then an idle tail to 24 hours.
TEST(AutoscaleSim, TheIdleTailUpToTheTracesEndIsPaidForAsTheStartIs) {
  ServingModel m;
  std::vector<SimRequest> reqs = Steady(600, 0.25, 0.5);
  SimOptions at_last;
  SimOptions at_end;
  at_end.end_s = 24 * 3600;
  PolicySpec warm;
  warm.kind = "tessera";
  warm.tessera.min_replicas = 1;
  warm.min_replicas = 1;
  PolicySpec zero;
  zero.kind = "tessera";
  PolicySpec foresight;
  foresight.kind = "clairvoyant";
  EXPECT_NEAR(Simulate(reqs, m, at_last, Fixed(3)).gpu_hours, 3 * 600.0 / 3600, 0.01);
  EXPECT_NEAR(Simulate(reqs, m, at_end, Fixed(3)).gpu_hours, 3 * 24, 0.01);
  // A warm floor of one pays one replica for the rest of the day; scaling to zero pays for what
  // it holds through the idle timeout (10 minutes) and KEDA's cooldown after the load, not for
  // the rest of the day; foresight for its plan, which ends with the load.
  SimResult w = Simulate(reqs, m, at_end, warm);
  SimResult z = Simulate(reqs, m, at_end, zero);
  SimResult z_last = Simulate(reqs, m, at_last, zero);
  // Measured: warm 25.28 GPU-hours; to zero 1.62 to the day's end, 0.92 to the last request.
  EXPECT_GT(w.gpu_hours, 24);
  EXPECT_LT(w.gpu_hours, 24 + w.peak_replicas * 1800.0 / 3600);
  // At zero no sooner than one replica's idle timeout after the load, and no later than the
  // peak's idle timeout plus KEDA's cooldown (the scale-down window runs within the former).
  EXPECT_GT(z.gpu_hours - z_last.gpu_hours, 600.0 / 3600);
  EXPECT_LT(z.gpu_hours - z_last.gpu_hours, z.peak_replicas * 900.0 / 3600);
  EXPECT_EQ(z.requests, 2400);
  EXPECT_LT(Simulate(reqs, m, at_end, foresight).gpu_hours, 3 * 700.0 / 3600);
  // The measured requests and their waits do not depend on where the trace ends.
  EXPECT_EQ(z.slo_attainment, z_last.slo_attainment);
  EXPECT_EQ(z.p99_wait_s, z_last.p99_wait_s);
}

TEST(AutoscaleSim, ClairvoyantPlanStartsAColdStartAheadAndBridgesShortGaps) {
  // 30 replica-seconds arrive in second 100: over a 10 s window at utilisation 1 that needs 3
  // replicas in seconds 91-100, so they start at 91 - 61 = 30 (cold start 60 s + 1 s).
  std::vector<SimRequest> reqs = {{100.2, 10, 0}, {100.4, 10, 0}, {100.6, 10, 0}};
  std::vector<int> plan = ClairvoyantPlan(reqs, 60, 1.0, 10);
  ASSERT_EQ(plan.size(), 102u);  // seconds 0 to 101 (the last arrival's second and one more)
  EXPECT_EQ(plan[29], 0);
  EXPECT_EQ(plan[30], 3);
  EXPECT_EQ(plan[100], 3);
  EXPECT_EQ(plan[101], 0);
  // At utilisation 0.5 twice as many.
  EXPECT_EQ(ClairvoyantPlan(reqs, 60, 0.5, 10)[50], 6);
  // A second burst 40 s later (under a cold start): the replicas stay through the gap.
  reqs.push_back({140.5, 10, 0});
  plan = ClairvoyantPlan(reqs, 60, 1.0, 10);
  EXPECT_EQ(plan[110], 1);  // one replica is needed again at 131-140
  EXPECT_EQ(plan[120], 1);
  // 200 s later (over a cold start): released after the first burst, restarted 61 s ahead.
  reqs.back().arrival = 340.5;
  plan = ClairvoyantPlan(reqs, 60, 1.0, 10);
  EXPECT_EQ(plan[101], 0);
  EXPECT_EQ(plan[269], 0);
  EXPECT_EQ(plan[270], 1);
}

TEST(AutoscaleSim, ClairvoyantMeetsTheSloWhereReactivePoliciesMeetTheColdStart) {
  // An idle service (one replica) meets a 5-minute burst that needs 4 replicas: whatever reacts
  // waits a cold start; foresight has them ready, pays only their start and the burst.
  ServingModel m;
  SimOptions o;
  std::vector<SimRequest> reqs = Steady(600, 1, 0.5);
  for (double t = 600; t < 900; t += 0.125) reqs.push_back({t, 0.5, 0.001});
  reqs.push_back({1800, 0.5, 0.001});
  PolicySpec c;
  c.kind = "clairvoyant";
  c.clairvoyant_utilization = 0.8;
  SimResult r = Simulate(reqs, m, o, c);
  EXPECT_EQ(r.slo_attainment, 1.0);
  EXPECT_EQ(r.params.at("cold_start_s"), 60);
  // Busy 4 replicas in the burst -> 5 at 0.8, started 61 s ahead; in the quiet parts 1 (0.5
  // s of work per second at 0.8).
  EXPECT_EQ(r.peak_replicas, 5);
  EXPECT_LT(r.gpu_hours, (1800 + 4 * (300 + 61 + 10)) / 3600.0 * 1.05);
  PolicySpec t;
  t.kind = "tessera";
  SimResult reactive = Simulate(reqs, m, o, t);
  EXPECT_LT(reactive.slo_attainment, r.slo_attainment);
}

TEST(AutoscaleSim, SimulateAllOnThreadsGivesTheRunsOneByOneInOrder) {
  ServingModel m;
  SimOptions o;
  std::vector<SimRequest> reqs = Steady(900, 0.5, 0.5);
  for (double t = 300; t < 420; t += 0.1) reqs.push_back({t, 0.5, 0.001});
  std::sort(reqs.begin(), reqs.end(),
            [](const SimRequest& a, const SimRequest& b) { return a.arrival < b.arrival; });
  std::vector<PolicySpec> specs;
  for (const char* kind : {"tessera", "keda-queue", "hpa-cpu", "clairvoyant"}) {
    PolicySpec p;
    p.kind = kind;
    specs.push_back(p);
  }
  specs.push_back(Fixed(2));
  specs.push_back(Fixed(6));
  PolicySpec slow;
  slow.kind = "tessera";
  slow.tessera.scale_down_window = absl::Minutes(2);
  specs.push_back(slow);
  auto same = [](const SimResult& a, const SimResult& b) {
    return a.policy == b.policy && a.params == b.params && a.gpu_hours == b.gpu_hours &&
           a.slo_attainment == b.slo_attainment && a.p99_wait_s == b.p99_wait_s &&
           a.cold_starts == b.cold_starts && a.peak_replicas == b.peak_replicas &&
           a.requests == b.requests;
  };
  std::vector<SimResult> one_by_one;
  one_by_one.reserve(specs.size());
  for (const PolicySpec& p : specs) one_by_one.push_back(Simulate(reqs, m, o, p));
  // More threads than runs, fewer, and none asked for (at least one runs).
  for (int jobs : {3, 16, 0}) {
    std::vector<SimResult> all = SimulateAll(reqs, m, o, specs, jobs);
    ASSERT_EQ(all.size(), specs.size()) << jobs;
    for (size_t i = 0; i < specs.size(); ++i) {
      EXPECT_TRUE(same(all[i], one_by_one[i])) << "jobs " << jobs << ", run " << i;
      EXPECT_GT(all[i].cpu_seconds, 0) << i;
    }
  }
  EXPECT_TRUE(SimulateAll(reqs, m, o, {}, 4).empty());
  // The runs differ from each other, so an order mixed up would show.
  EXPECT_NE(one_by_one[4].gpu_hours, one_by_one[5].gpu_hours);
}

TEST(AutoscaleSim, RateScaleMultipliesRequests) {
  ServingModel m;
  std::vector<TokenRow> rows = {{0, 1000, 10}, {1, 2000, 20}, {5, 100, 1}};
  std::vector<SimRequest> r = ScaleRequests(rows, m, 3, 7);
  EXPECT_EQ(r.size(), 9u);
  for (size_t i = 1; i < r.size(); ++i) EXPECT_LE(r[i - 1].arrival, r[i].arrival);
  EXPECT_NEAR(r[0].work, m.Work(1000, 10), 1e-12);
  EXPECT_EQ(ScaleRequests(rows, m, 1, 7)[1].arrival, 1.0);  // K = 1 replays as recorded
}

TEST(AutoscaleSim, IndependentCopiesSpreadABurstThatDenseCopiesStack) {
  ServingModel m;
  // A 100-second trace: one request per second, and a burst of 50 in second 40.
  std::vector<TokenRow> rows;
  rows.reserve(150);
  for (int i = 0; i < 100; ++i) rows.push_back({i + 0.5, 1000, 10});
  for (int i = 0; i < 50; ++i) rows.push_back({40.25, 1000, 10});
  auto per_second = [](const std::vector<SimRequest>& r) {
    std::vector<int> n(101, 0);
    for (const SimRequest& q : r) n.at(static_cast<size_t>(q.arrival))++;
    return n;
  };
  std::vector<SimRequest> dense = ScaleRequests(rows, m, 3, 7, RateMode::kDense);
  std::vector<SimRequest> indep = ScaleRequests(rows, m, 3, 7, RateMode::kIndependent);
  ASSERT_EQ(dense.size(), 450u);
  ASSERT_EQ(indep.size(), 450u);
  for (size_t i = 1; i < indep.size(); ++i) EXPECT_LE(indep[i - 1].arrival, indep[i].arrival);
  // Dense: the burst is 150 requests within a second of 40.25.
  int in_burst = 0;
  for (const SimRequest& q : dense) in_burst += q.arrival >= 40.25 && q.arrival < 41.25 ? 1 : 0;
  EXPECT_GE(in_burst, 150);
  // Independent: the trace wraps within its span; the first copy is as recorded (its burst in
  // second 40) and the others carry theirs elsewhere, so no second holds more than two bursts.
  // The span is the first arrival to one second past the last: [0.5, 100.5).
  EXPECT_GE(indep.front().arrival, 0.5);
  EXPECT_LT(indep.back().arrival, 100.5);
  std::vector<int> n = per_second(indep);
  int seconds_with_a_burst = 0, most = 0;
  for (int c : n) {
    seconds_with_a_burst += c >= 50 ? 1 : 0;
    most = std::max(most, c);
  }
  EXPECT_GE(seconds_with_a_burst, 2);
  EXPECT_LT(most, 150);
  EXPECT_GE(n[40], 50);
}

// Independent copies of a trace in time order are merged from their runs; they must come out as
// the copies, made row by row, then stably sorted by time would: the same times in the same order,
// ties (a row's copies, rows recorded in the same instant) by row and then by copy. Whole and
// fractional K, ties, and a trace out of order (sorted as before).
TEST(AutoscaleSim, IndependentCopiesInTimeOrderAreWhatAStableSortOfThemGives) {
  ServingModel m;
  Random gen(3);
  std::vector<TokenRow> rows;
  double t = 10;
  for (int i = 0; i < 5000; ++i) {
    // Gaps of 0 (ties) to a few seconds; tokens telling the rows apart.
    t += gen.Bernoulli(0.2) ? 0 : 3 * gen.UniformDouble();
    rows.push_back({t, 100 + i, 1 + i % 50});
  }
  auto reference = [&](const std::vector<TokenRow>& in, double k, uint64_t seed) {
    Random rng(seed);
    const int whole = static_cast<int>(std::floor(k));
    const double frac = k - whole;
    double begin = HUGE_VAL, last = -HUGE_VAL;
    for (const TokenRow& r : in) {
      begin = std::min(begin, r.arrival_s);
      last = std::max(last, r.arrival_s);
    }
    const double span = last - begin + 1;
    std::vector<double> shift = {0};
    for (int c = 1; c <= whole; ++c) shift.push_back(rng.UniformDouble() * span);
    std::vector<SimRequest> out;
    for (const TokenRow& r : in) {
      const int copies = whole + (rng.Bernoulli(frac) ? 1 : 0);
      for (int c = 0; c < copies; ++c) {
        out.push_back({begin + std::fmod(r.arrival_s - begin + shift[c], span),
                       m.Work(r.context, r.generated), m.Cpu(r.context, r.generated)});
      }
    }
    std::stable_sort(out.begin(), out.end(), [](const SimRequest& a, const SimRequest& b) {
      return a.arrival < b.arrival;
    });
    return out;
  };
  auto same = [](const std::vector<SimRequest>& a, const std::vector<SimRequest>& b) {
    if (a.size() != b.size())
      return ::testing::AssertionFailure() << a.size() << " vs " << b.size();
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].arrival != b[i].arrival || a[i].work != b[i].work || a[i].cpu != b[i].cpu) {
        return ::testing::AssertionFailure()
               << "request " << i << ": " << a[i].arrival << " vs " << b[i].arrival;
      }
    }
    return ::testing::AssertionSuccess();
  };
  for (double k : {1.0, 3.0, 8.0, 2.5, 0.4}) {
    for (uint64_t seed : {1, 2, 3}) {
      EXPECT_TRUE(
          same(ScaleRequests(rows, m, k, seed, RateMode::kIndependent), reference(rows, k, seed)))
          << "K " << k << " seed " << seed;
    }
  }
  // Out of order: the same copies, sorted.
  std::vector<TokenRow> shuffled = rows;
  std::swap(shuffled[10], shuffled[4000]);
  EXPECT_TRUE(same(ScaleRequests(shuffled, m, 2.5, 4, RateMode::kIndependent),
                   reference(shuffled, 2.5, 4)));
}

TEST(AutoscaleSim, SynthesisKeepsEachWindowsRate) {
  ServingModel m;
  std::vector<RateWindow> w = {{0, 600, 2.0, "Gamma", 0.25, 2.0},
                               {600, 600, 0, "", 0, 0},
                               {1200, 600, 0.5, "Weibull", 0.8, 1.7}};
  std::vector<SimRequest> r = SynthesizeRequests(w, m, 1, 1024, 128, 3);
  int first = 0, second = 0, third = 0;
  for (const SimRequest& q : r) (q.arrival < 600 ? first : q.arrival < 1200 ? second : third)++;
  EXPECT_NEAR(first, 1200, 250);  // bursty (CV 2): loose bounds
  EXPECT_EQ(second, 0);
  EXPECT_NEAR(third, 300, 80);
}

// The message of a parse that must fail.
std::string AzureError(const std::string& file, const std::string& text) {
  return std::string(adapters::ParseAzureLlmTrace(file, text).status().message());
}

TEST(LlmTraces, ParseAndLocateErrors) {
  auto rows = adapters::ParseAzureLlmTrace(
      "a.csv",
      "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,4808,10\r\n"
      "2023-11-16 18:17:05.4799600,31,7");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_NEAR((*rows)[1].arrival_s, 1.5, 1e-6);
  EXPECT_EQ((*rows)[0].context_tokens, 4808);
  // The 2024 one-week release: a UTC offset, and no fraction on a whole second.
  auto week = adapters::ParseAzureLlmTrace(
      "w.csv",
      "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00+00:00,100,5\n"
      "2024-05-10 00:00:00.009930+00:00,200,6\n2024-05-10 02:00:01.5+02:00,300,7\n");
  ASSERT_TRUE(week.ok()) << week.status();
  ASSERT_EQ(week->size(), 3u);
  EXPECT_NEAR((*week)[1].arrival_s, 0.00993, 1e-9);
  EXPECT_NEAR((*week)[2].arrival_s, 1.5, 1e-9);  // 02:00:01.5 at +02:00 is 00:00:01.5 UTC
  EXPECT_THAT(
      AzureError("w.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10T00:00:00Z,1,1\n"),
      HasSubstr("w.csv:2:1: TIMESTAMP: expected YYYY-MM-DD HH:MM:SS"));
  EXPECT_THAT(
      AzureError("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,x,10\n"),
      HasSubstr("a.csv:2:23: ContextTokens"));
  EXPECT_THAT(AzureError("a.csv", "nope\n"), HasSubstr("header"));
  auto sg = adapters::ParseServeGenTrace(
      "c.csv", "0,0.0,0,,0,0\r\n600,1.5,2.1,Gamma,0.2267,2.94\r\n1200,0.1,1.0,Weibull,0.9,8.1\r\n");
  ASSERT_TRUE(sg.ok()) << sg.status();
  EXPECT_EQ((*sg)[1].distribution, "Gamma");
  EXPECT_THAT(adapters::ParseServeGenTrace("c.csv", "0,1.0,1,Poisson,1,1\n").status().message(),
              HasSubstr("c.csv:1:9: distribution"));
}

// The Azure reader's own timestamp parser (the releases' forms, fast) against absl::ParseTime,
// which it stands in for: random times in both releases' forms, with 0-12 fractional digits and
// offsets in and out of range, and dates and fields civil time would carry over (February 30,
// month 13, hour 24, a leap second) or a character changed. Each is read as the second and third
// row after a reference row: accepted exactly when absl accepts it, at the same time to the
// nanosecond, or refused with the row's line.
TEST(LlmTraces, TimestampsAreReadAsAbslParseTimeReadsThem) {
  Random rng(5);
  const absl::Time ref =
      absl::FromCivil(absl::CivilSecond(1900, 1, 1, 0, 0, 0), absl::UTCTimeZone());
  int accepted = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string ts = absl::StrFormat(
        "%04d-%02d-%02d %02d:%02d:%02d", rng.UniformInt(1970, 2100), rng.UniformInt(1, 12),
        rng.UniformInt(1, 31), rng.UniformInt(0, 23), rng.UniformInt(0, 59), rng.UniformInt(0, 59));
    const int64_t digits = rng.UniformInt(0, 12);
    if (digits > 0) {
      absl::StrAppend(&ts, ".");
      for (int64_t k = 0; k < digits; ++k) absl::StrAppend(&ts, rng.UniformInt(0, 9));
    }
    if (rng.Bernoulli(0.5)) {
      absl::StrAppend(&ts, rng.Bernoulli(0.5) ? "+" : "-",
                      absl::StrFormat("%02d:%02d", rng.UniformInt(0, 25), rng.UniformInt(0, 61)));
    }
    switch (rng.UniformInt(0, 7)) {
      case 0:
        ts.replace(5, 5, rng.Bernoulli(0.5) ? "02-30" : "13-01");
        break;
      case 1:
        ts.replace(11, 2, "24");
        break;
      case 2:
        ts.replace(17, 2, "60");
        break;
      case 3:
        ts[static_cast<size_t>(rng.UniformInt(0, static_cast<int64_t>(ts.size()) - 1))] =
            " .:-+Z9x"[rng.UniformInt(0, 7)];
        break;
      default:
        break;
    }
    absl::Time want;
    std::string err;
    const bool ok = absl::ParseTime("%Y-%m-%d %H:%M:%E*S", ts, absl::UTCTimeZone(), &want, &err) ||
                    absl::ParseTime("%Y-%m-%d %H:%M:%E*S%Ez", ts, absl::UTCTimeZone(), &want, &err);
    auto rows = adapters::ParseAzureLlmTrace(
        "t.csv", absl::StrCat("TIMESTAMP,ContextTokens,GeneratedTokens\n1900-01-01 00:00:00,1,1\n",
                              ts, ",1,1\n", ts, ",1,1\n"));
    if (ok && want >= ref) {
      ++accepted;
      ASSERT_TRUE(rows.ok()) << ts << ": " << rows.status();
      ASSERT_EQ(rows->size(), 3u);
      EXPECT_EQ((*rows)[1].arrival_s, absl::ToDoubleSeconds(want - ref)) << ts;
      EXPECT_EQ((*rows)[2].arrival_s, (*rows)[1].arrival_s) << ts;
    } else if (!ok) {
      ++refused;
      ASSERT_FALSE(rows.ok()) << ts;
      EXPECT_THAT(rows.status().message(), HasSubstr("t.csv:3:1: TIMESTAMP: expected")) << ts;
    }
  }
  // Both outcomes well represented.
  EXPECT_GT(accepted, 5000);
  EXPECT_GT(refused, 5000);
}

// Columns by name: the multimodal trace (AzureLMMInferenceTrace) adds NumImages; any order. A
// UTF-8 byte-order mark (spreadsheet exports) before the header is not part of it.
TEST(LlmTraces, ColumnsByNameAndAByteOrderMark) {
  auto mm = adapters::ParseAzureLlmTrace(
      "m.csv",
      "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n"
      "2024-10-15 00:00:00.004000+00:00,2,1900,45\n2024-10-15 00:00:00.504000+00:00,0,20,5\n");
  ASSERT_TRUE(mm.ok()) << mm.status();
  ASSERT_EQ(mm->size(), 2u);
  EXPECT_EQ((*mm)[0].context_tokens, 1900);
  EXPECT_EQ((*mm)[0].generated_tokens, 45);
  EXPECT_NEAR((*mm)[1].arrival_s, 0.5, 1e-9);
  auto reordered = adapters::ParseAzureLlmTrace(
      "r.csv", "GeneratedTokens,TIMESTAMP,ContextTokens\n7,2023-11-16 18:17:03.9,300\n");
  ASSERT_TRUE(reordered.ok()) << reordered.status();
  EXPECT_EQ((*reordered)[0].generated_tokens, 7);
  EXPECT_EQ((*reordered)[0].context_tokens, 300);
  const std::string header = "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n";
  EXPECT_THAT(AzureError("m.csv", header + "2024-10-15 00:00:00+00:00,1,x,5\n"),
              HasSubstr("m.csv:2:29: ContextTokens"));
  EXPECT_THAT(AzureError("m.csv", "TIMESTAMP,NumImages,ContextTokens\n"),
              HasSubstr("m.csv:1:1: expected a header with the columns TIMESTAMP, ContextTokens "
                        "and GeneratedTokens (missing GeneratedTokens)"));
  EXPECT_THAT(AzureError("m.csv", header + "2024-10-15 00:00:00+00:00,1,5\n"),
              HasSubstr("m.csv:2:1: expected 4 fields, found 3"));
  auto bom = adapters::ParseAzureLlmTrace(
      "b.csv", "\xEF\xBB\xBFTIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,1,2\n");
  ASSERT_TRUE(bom.ok()) << bom.status();
  EXPECT_EQ((*bom)[0].generated_tokens, 2);
  auto sg_bom = adapters::ParseServeGenTrace("c.csv",
                                             "\xEF\xBB\xBF"
                                             "0,0.5,1,Gamma,1,2\n");
  ASSERT_TRUE(sg_bom.ok()) << sg_bom.status();
  EXPECT_EQ((*sg_bom)[0].start_s, 0);
  // Blank lines at the end end the file; one within it is a malformed row, with its line.
  auto trailing = adapters::ParseServeGenTrace("c.csv", "0,0.5,1,Gamma,1,2\r\n\r\n \n\n");
  ASSERT_TRUE(trailing.ok()) << trailing.status();
  EXPECT_EQ(trailing->size(), 1u);
  EXPECT_THAT(adapters::ParseServeGenTrace("c.csv", "0,0.5,1,Gamma,1,2\n\n600,0.5,1,Gamma,1,2\n")
                  .status()
                  .message(),
              HasSubstr("c.csv:2:1: expected 6 fields"));
  auto az = adapters::ParseAzureLlmTrace(
      "b.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,1,2\n\n\n");
  ASSERT_TRUE(az.ok()) << az.status();
  EXPECT_EQ(az->size(), 1u);
}

// A query_range body as Debian's Prometheus 2.42 answered
// sum(rate(prometheus_http_requests_total[5s])) at step=2 (recorded; the last two samples
// dropped and one removed to make a gap), then the errors a user meets.
TEST(LlmTraces, PromRangeRateFromAQueryRangeBody) {
  auto steps = adapters::ParsePromRangeRate(
      "r.json",
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":)"
      R"([[1796288192,"0.417"],[1796288194,"0.817"],[1796288196,"1"],[1796288198,"1"],)"
      R"([1796288202,"1"],[1796288204,"1"],[1796288206,"13.4295"]]}]}})");
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_EQ(steps->size(), 7u);
  EXPECT_EQ((*steps)[0].start_s, 0);
  EXPECT_EQ((*steps)[0].length_s, 2);  // the step: the samples' smallest spacing
  EXPECT_DOUBLE_EQ((*steps)[0].rate, 0.417);
  // The missing sample at 1796288200 leaves [8, 10) without a window: rate 0.
  EXPECT_EQ((*steps)[3].start_s, 6);
  EXPECT_EQ((*steps)[4].start_s, 10);
  EXPECT_DOUBLE_EQ((*steps)[6].rate, 13.4295);
  // Arrivals synthesised from it keep each window's rate: about 2 s x the sum of the rates.
  std::vector<RateWindow> w;
  for (const adapters::RateStep& st : *steps) {
    w.push_back({st.start_s, st.length_s, st.rate, "Gamma", 1, 1});
  }
  size_t n = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    n += SynthesizeRequests(w, ServingModel{}, 1, 1024, 128, seed).size();
  }
  EXPECT_NEAR(n / 200.0, 2 * (0.417 + 0.817 + 1 + 1 + 1 + 1 + 13.4295), 1.0);

  auto error = [](const std::string& body) {
    return std::string(adapters::ParsePromRangeRate("r.json", body).status().message());
  };
  EXPECT_THAT(error(R"({"status":"success","data":{"resultType":"vector","result":[]}})"),
              HasSubstr("r.json:1:42: data.resultType: expected \"matrix\" (the body of "
                        "/api/v1/query_range, not /api/v1/query)"));
  EXPECT_THAT(error(R"({"status":"error","errorType":"bad_data","error":"parse error"})"),
              HasSubstr("expected \"success\", found \"error\": parse error"));
  EXPECT_THAT(error(R"({"status":"success","data":{"resultType":"matrix","result":[)"
                    R"({"metric":{"pod":"a"},"values":[[1,"1"],[2,"1"]]},)"
                    R"({"metric":{"pod":"b"},"values":[[1,"1"],[2,"1"]]}]}})"),
              HasSubstr("expected one series (aggregate the query, e.g. sum(rate(...))), found 2"));
  EXPECT_THAT(error(R"({"status":"success","data":{"resultType":"matrix","result":[)"
                    "{\"metric\":{},\"values\":\n[[1,\"1\"],[2,\"-3\"]]}]}}"),
              HasSubstr("r.json:2:13: data.result[0].values[1][1]: expected a request rate"));
  EXPECT_THAT(error(R"({"status":"success","data":{"resultType":"matrix","result":[)"
                    R"({"metric":{},"values":[[2,"1"],[1,"1"]]}]}})"),
              HasSubstr("values[1][0]: samples must be in increasing time"));
  EXPECT_THAT(error(R"({"status":"success","data":{"resultType":"matrix","result":[)"
                    R"({"metric":{},"values":[[2,"NaN"],[3,"1"]]}]}})"),
              HasSubstr("found \"NaN\""));
  EXPECT_THAT(error(R"({"status":"success","data":{"resultType":"matrix","result":[)"
                    R"({"metric":{},"values":[[2,"1"]]}]}})"),
              HasSubstr("expected at least 2 samples"));
  EXPECT_THAT(error("{\"status\": \"success\", \"data\": [1,"), HasSubstr("malformed YAML/JSON"));
}

}  // namespace
}  // namespace tessera::sim
