// The scaler's poll loop on a simulated clock with scripted signals: what it logs (one line per
// change of decision, with the reason) and what it answers after Prometheus fails.
#include "adapters/keda/scaler.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "adapters/io/files.h"
#include "adapters/io/test_scratch_dir.h"
#include "adapters/keda/test_scaler_server.h"
#include "adapters/net/test_http_server.h"
#include "adapters/prometheus/test_slow_range.h"
#include "externalscaler.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Answers each query with the number the test set; Unavailable while `down`.
class ScriptedSource final : public MetricSource {
 public:
  explicit ScriptedSource(const Clock& clock) : clock_(clock) {}
  absl::StatusOr<PromValue> Query(const std::string& promql, absl::Time /*at*/) override {
    std::lock_guard<std::mutex> l(mu);
    ++queries;
    if (down) return absl::UnavailableError("GET http://prom/api/v1/query: Connection refused");
    PromValue v;
    v.value = values[promql];
    v.sampled = clock_.Now();
    return v;
  }
  // Sets the values under the lock (the server's poll thread may be querying).
  void Set(std::map<std::string, double> v) {
    std::lock_guard<std::mutex> l(mu);
    values = std::move(v);
  }
  std::mutex mu;  // the server's poll thread reads what the test sets
  std::map<std::string, double> values;
  bool down = false;
  int queries = 0;

 private:
  const Clock& clock_;
};

// A ScalerConfig with Prometheus at http://prom:9090 (plus `prometheus_extra` in its map, e.g.
// ", pollInterval: 100ms") and this `services:` list (YAML, one "  - {...}" line per service).
absl::StatusOr<ScalerConfig> ConfigWith(const std::string& services,
                                        const std::string& prometheus_extra = "") {
  return DecodeScalerConfig("s.yaml", absl::StrCat("apiVersion: tessera.io/v1alpha1\n"
                                                   "kind: ScalerConfig\n"
                                                   "prometheus: {url: \"http://prom:9090\"",
                                                   prometheus_extra, "}\nservices:\n", services));
}

// Counts the queries in flight at once; each takes a millisecond.
class SlowSource final : public MetricSource {
 public:
  absl::StatusOr<PromValue> Query(const std::string& promql, absl::Time /*at*/) override {
    const int now = ++in_flight_;
    int seen = most_.load();
    while (now > seen && !most_.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    --in_flight_;
    PromValue v;
    // "waiting-7" -> 70; ready -> 1; the rest 0.
    v.value = absl::StartsWith(promql, "waiting-") ? 10.0 * std::stoi(promql.substr(8))
              : promql == "ready"                  ? 1
                                                   : 0;
    v.sampled = absl::FromUnixSeconds(1764700000);
    return v;
  }
  int most() const { return most_.load(); }

 private:
  std::atomic<int> in_flight_{0};
  std::atomic<int> most_{0};
};

// Services are polled prometheus.concurrency at a time: the same decisions and log lines, in
// config order, as one at a time, with no more queries in flight than the bound.
TEST(Scaler, PollsServicesConcurrentlyWithinTheBound) {
  std::string services;
  for (int i = 0; i < 24; ++i) {
    absl::StrAppend(&services, "  - {name: s", i, ", queueQuery: waiting-", i,
                    ", runningQuery: running, readyQuery: ready, maxReplicas: 1000}\n");
  }
  std::vector<std::string> logs[2];
  std::vector<int> replicas[2];
  int most[2] = {0, 0};
  for (int run = 0; run < 2; ++run) {
    absl::StatusOr<ScalerConfig> config =
        ConfigWith(services, run == 0 ? ", concurrency: 1" : ", concurrency: 3");
    ASSERT_TRUE(config.ok()) << config.status();
    SimulatedClock clock(absl::FromUnixSeconds(1764700000));
    SlowSource prom;
    Scaler scaler(*config, prom, clock,
                  [&](const std::string& line) { logs[run].push_back(line); });
    scaler.PollOnce();
    for (int i = 0; i < 24; ++i)
      replicas[run].push_back(scaler.View(absl::StrCat("s", i))->replicas);
    most[run] = prom.most();
  }
  EXPECT_EQ(most[0], 1);
  EXPECT_LE(most[1], 3);
  EXPECT_GE(most[1], 2);
  EXPECT_EQ(replicas[0], replicas[1]);
  EXPECT_EQ(logs[0], logs[1]);
  ASSERT_EQ(logs[1].size(), 24u);
  EXPECT_THAT(logs[1][0], HasSubstr("s0: "));
  EXPECT_THAT(logs[1][23], HasSubstr("s23: "));
  EXPECT_GT(replicas[1][23], replicas[1][1]);  // 230 waiting need more than 10
  // The bound is read from the config, 1 to 64.
  EXPECT_THAT(ConfigWith(services, ", concurrency: 0").status().message(),
              HasSubstr("prometheus.concurrency"));
}

TEST(Scaler, LogsEachChangeOfDecisionWithItsReason) {
  absl::StatusOr<ScalerConfig> config =
      ConfigWith(R"(  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready,
     targetQueuePerReplica: 4, minReplicas: 1, scaleDownWindow: 0s, staleAfter: 30s}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  SimulatedClock clock(absl::FromUnixSeconds(1764700000));
  ScriptedSource prom(clock);
  std::vector<std::string> log;
  Scaler scaler(*config, prom, clock, [&](const std::string& line) { log.push_back(line); });

  prom.values = {{"waiting", 0}, {"running", 2}, {"ready", 1}};
  scaler.PollOnce();
  clock.Advance(absl::Seconds(5));
  scaler.PollOnce();  // the same decision: no second line
  ASSERT_EQ(log.size(), 1u);
  EXPECT_THAT(log[0], HasSubstr("chat: 1 replicas: hold at 1"));

  prom.values = {{"waiting", 40}, {"running", 16}, {"ready", 1}};
  clock.Advance(absl::Seconds(5));
  scaler.PollOnce();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_THAT(log[1], HasSubstr("chat: 3 replicas (was 1): scale up to 3: queue: 40 waiting"));

  prom.down = true;
  clock.Advance(absl::Seconds(5));
  scaler.PollOnce();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_THAT(log[2], HasSubstr("chat: 3 replicas, data missing: holding at 3"));
  // Each distinct problem once, though every query failed.
  EXPECT_THAT(log[2], HasSubstr("[GET http://prom/api/v1/query: Connection refused]"));
  absl::StatusOr<ScalerView> v = scaler.View("chat");
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->fresh);
  EXPECT_EQ(v->replicas, 3);

  prom.down = false;
  prom.values = {{"waiting", 0}, {"running", 30}, {"ready", 3}};
  clock.Advance(absl::Seconds(5));
  scaler.PollOnce();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_THAT(log[3], HasSubstr("chat: 3 replicas: hold at 3"));  // the data is back
  EXPECT_TRUE(scaler.View("chat")->fresh);

  // Without a sink: the same decisions.
  SimulatedClock quiet_clock(absl::FromUnixSeconds(1764700000));
  ScriptedSource quiet_prom(quiet_clock);
  quiet_prom.values = {{"waiting", 40}, {"running", 16}, {"ready", 1}};
  Scaler quiet(*config, quiet_prom, quiet_clock);
  quiet.PollOnce();
  EXPECT_EQ(quiet.View("chat")->replicas, 3);
}

// GET /status: each service's decision, whether GetMetrics answers it, why, and the signals it
// rests on; a service not polled yet; whether the config file's text runs.
TEST(Scaler, StatusSaysWhatEachServiceDecidedAndWhy) {
  absl::StatusOr<ScalerConfig> config =
      ConfigWith(R"(  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready,
     targetQueuePerReplica: 4, minReplicas: 1, maxReplicas: 20, staleAfter: 30s}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  SimulatedClock clock(absl::FromUnixSeconds(1764700000));
  ScriptedSource prom(clock);
  Scaler scaler(*config, prom, clock);
  EXPECT_EQ(scaler.StatusText(),
            "tessera scaler at 2025-12-02T18:26:40Z: 1 services; config: the file's text runs "
            "(reloads while serving: 0 applied, 0 invalid, 0 needing a restart)\n"
            "chat: no poll yet\n");

  prom.values = {{"waiting", 40}, {"running", 16}, {"ready", 1}};
  scaler.PollOnce();
  clock.Advance(absl::Seconds(12));
  const std::string fresh = scaler.StatusText();
  EXPECT_THAT(fresh, HasSubstr("\nchat: 3 replicas, fresh (GetMetrics answers it), decided 12s "
                               "ago (minReplicas 1, maxReplicas 20)\n"
                               "  why: scale up to 3: queue: 40 waiting + 16 running"));
  EXPECT_THAT(
      fresh,
      HasSubstr("\n  signals: waiting 40, running 16, ready 1, starting 0, utilization 0\n"));
  // Its history not rebuilt (the test does not run the backfill): said so.
  EXPECT_THAT(fresh, HasSubstr("\n  polls 1, 0 of them without fresh data, 0 query failures; "
                               "load history 1 minutes (to be rebuilt from Prometheus)\n"));

  // Prometheus gone: the decision held, KEDA's fallback named, the failure in the reason.
  prom.down = true;
  scaler.PollOnce();
  clock.Advance(absl::Seconds(31));
  const std::string held = scaler.StatusText();
  EXPECT_THAT(held, HasSubstr("chat: 3 replicas, held on missing or stale data (GetMetrics "
                              "answers UNAVAILABLE: KEDA's fallback applies), decided 31s ago"));
  EXPECT_THAT(held, HasSubstr("[GET http://prom/api/v1/query: Connection refused]"));
  EXPECT_THAT(held, HasSubstr("  signals: none read\n"));
  // Five queries failed: ready, waiting, running, and the utilisation and starting queries that
  // default from the service's name.
  EXPECT_THAT(held, HasSubstr("  polls 2, 1 of them without fresh data, 5 query failures"));

  // A service added by a reload, and a change of the file that was not taken.
  absl::StatusOr<ScalerConfig> more = ConfigWith(
      "  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready,\n"
      "     targetQueuePerReplica: 4, minReplicas: 1, maxReplicas: 20, staleAfter: 30s}\n"
      "  - {name: code, queueQuery: code_waiting}\n");
  ASSERT_TRUE(more.ok()) << more.status();
  ASSERT_TRUE(scaler.Reload(*more).ok());
  scaler.CountConfigReload("applied", true);
  scaler.CountConfigReload("invalid", false);
  const std::string reloaded = scaler.StatusText();
  EXPECT_THAT(reloaded, HasSubstr(": 2 services; config: the file holds a change that was not "
                                  "taken (the log says why) (reloads while serving: 1 applied, 1 "
                                  "invalid, 0 needing a restart)\n"));
  EXPECT_THAT(reloaded, HasSubstr("\ncode: no poll yet (added by a config reload)\n"));
}

TEST(Scaler, AtZeroTheActivationQueryStandsInForTheServersQueue) {
  auto config = [](const std::string& extra) {
    return ConfigWith(
        absl::StrCat("  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: "
                     "ready, minReplicas: 0",
                     extra, "}\n"));
  };
  absl::StatusOr<ScalerConfig> with = config(", activationQuery: gateway");
  absl::StatusOr<ScalerConfig> without = config("");
  ASSERT_TRUE(with.ok()) << with.status();
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(with->services[0].activation_query, "gateway");
  SimulatedClock clock(absl::FromUnixSeconds(1764700000));
  ScriptedSource prom(clock);
  Scaler gated(*with, prom, clock), plain(*without, prom, clock);
  // At zero, nothing anywhere: both stay at zero.
  prom.values = {{"waiting", 0}, {"running", 0}, {"ready", 0}, {"gateway", 0}};
  gated.PollOnce();
  plain.PollOnce();
  EXPECT_EQ(gated.View("chat")->replicas, 0);
  EXPECT_EQ(plain.View("chat")->replicas, 0);
  // Requests wait at the gateway (no server is up to report them): only the service that
  // reads the gateway wakes.
  prom.values["gateway"] = 3;
  clock.Advance(absl::Seconds(5));
  gated.PollOnce();
  plain.PollOnce();
  EXPECT_EQ(gated.View("chat")->replicas, 1);
  EXPECT_THAT(gated.View("chat")->reason, HasSubstr("activation from zero"));
  EXPECT_EQ(plain.View("chat")->replicas, 0);
  // Once a replica is ready, the servers' own queue decides; the gateway's is not read.
  prom.values = {{"waiting", 0}, {"running", 1}, {"ready", 1}, {"gateway", 500}};
  clock.Advance(absl::Seconds(5));
  gated.PollOnce();
  EXPECT_EQ(gated.View("chat")->replicas, 1);
  EXPECT_THAT(gated.View("chat")->reason, HasSubstr("queue: 0 waiting"));
}

// KEDA's `external-push`: StreamIsActive pushes the activity every poll interval, so a service
// at zero is woken as soon as requests wait, without KEDA's polling delay.
// chat's knobs (`knobs`, YAML flow entries) and a second service `other`.
absl::StatusOr<ScalerConfig> ReloadConfig(const std::string& knobs,
                                          const std::string& other = "other") {
  return ConfigWith(absl::StrCat("  - {name: chat, queueQuery: waiting, readyQuery: ready, ", knobs,
                                 "}\n  - {name: ", other,
                                 ", queueQuery: o_waiting, "
                                 "readyQuery: o_ready, minReplicas: 1}\n"));
}

TEST(Scaler, AReloadTakesTheServicesChangesAndKeepsWhatTheyLearned) {
  absl::StatusOr<ScalerConfig> before = ReloadConfig("maxReplicas: 20");
  ASSERT_TRUE(before.ok()) << before.status();
  SimulatedClock clock(absl::FromUnixSeconds(1764700000));
  ScriptedSource prom(clock);
  prom.values = {{"waiting", 40}, {"ready", 10}, {"o_waiting", 0}, {"o_ready", 1}};
  Scaler scaler(*before, prom, clock);
  scaler.PollOnce();
  ASSERT_EQ(scaler.View("chat")->replicas, 10);
  // The queue gone: the scale-down window holds the 10 it asked for.
  prom.values["waiting"] = 0;
  clock.Advance(absl::Seconds(15));
  scaler.PollOnce();
  ASSERT_EQ(scaler.View("chat")->replicas, 10);

  // A knob of chat changed, `other` renamed `fresh`: what chat learned (the window) is kept.
  absl::StatusOr<ScalerConfig> after = ReloadConfig("maxReplicas: 20, coldStart: 90s", "fresh");
  ASSERT_TRUE(after.ok()) << after.status();
  absl::StatusOr<std::string> changed = scaler.Reload(*after);
  ASSERT_TRUE(changed.ok()) << changed.status();
  // coldStart sets the seasonal rule's lead, not how far back it reads: chat's load history is
  // kept as it is, and nothing of it is rebuilt.
  EXPECT_EQ(*changed, "chat changed; fresh added, its history to be rebuilt; other removed");
  EXPECT_EQ(scaler.View("other").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(scaler.View("other").status().message(), HasSubstr("(known: chat, fresh)"));
  EXPECT_EQ(scaler.View("fresh")->reason, "no poll yet (added by a config reload)");
  EXPECT_EQ(scaler.config()->Find("chat")->policy.cold_start, absl::Seconds(90));
  clock.Advance(absl::Seconds(15));
  scaler.PollOnce();
  EXPECT_EQ(scaler.View("chat")->replicas, 10);  // still held: the window was kept
  EXPECT_EQ(scaler.View("fresh")->replicas, 1);
  EXPECT_EQ(scaler.View("other").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(scaler.MetricsText(), Not(HasSubstr("service=\"other\"")));

  // A ceiling lowered applies from the next poll.
  absl::StatusOr<ScalerConfig> lower = ReloadConfig("maxReplicas: 3, coldStart: 90s", "fresh");
  ASSERT_TRUE(lower.ok()) << lower.status();
  EXPECT_EQ(*scaler.Reload(*lower), "chat changed");
  EXPECT_EQ(*scaler.Reload(*lower), "");  // the same again: nothing changed
  clock.Advance(absl::Seconds(15));
  scaler.PollOnce();
  EXPECT_EQ(scaler.View("chat")->replicas, 3);

  // Prometheus elsewhere: nothing taken, not even the services' changes.
  absl::StatusOr<ScalerConfig> moved =
      ConfigWith("  - {name: chat, queueQuery: waiting, readyQuery: ready}\n", ", timeout: 5s");
  ASSERT_TRUE(moved.ok()) << moved.status();
  changed = scaler.Reload(*moved);
  EXPECT_EQ(changed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(changed.status().message(), HasSubstr("restart the scaler to apply"));
  EXPECT_EQ(scaler.config()->Find("chat")->policy.max_replicas, 3);
  EXPECT_TRUE(scaler.View("fresh").ok());
}

TEST(Scaler, AChangedConfigFileIsTakenOrReportedOnce) {
  testing::ScratchDir dir("reload");
  const std::string path = dir.path() + "/scaler.yaml";
  auto text_of = [](const std::string& services, const std::string& prometheus = "") {
    return absl::StrCat("apiVersion: tessera.io/v1alpha1\nkind: ScalerConfig\n",
                        "prometheus: {url: \"http://prom:9090\"", prometheus, "}\nservices:\n",
                        services);
  };
  const std::string v1 = text_of("  - {name: chat, queueQuery: w, readyQuery: r}\n");
  const std::string v2 =
      text_of("  - {name: chat, queueQuery: w, readyQuery: r, minReplicas: 2}\n");
  absl::StatusOr<ScalerConfig> config = DecodeScalerConfig(path, v1);
  ASSERT_TRUE(config.ok()) << config.status();
  SimulatedClock clock(absl::FromUnixSeconds(1764700000));
  ScriptedSource prom(clock);
  std::vector<std::string> log;
  Scaler scaler(*config, prom, clock, [&log](const std::string& line) { log.push_back(line); });
  ConfigWatch watch{path, v1};
  auto write = [&path](const std::string& text) {
    ASSERT_TRUE(WriteFileAtomically(path, text).ok());
  };
  auto metric = [&scaler](const std::string& sample) {
    return absl::StrContains(scaler.MetricsText(), absl::StrCat("\n", sample, "\n"));
  };
  write(v1);
  CheckConfigFile(scaler, &watch);  // unchanged: nothing
  EXPECT_TRUE(log.empty());
  EXPECT_TRUE(metric("tessera_scaler_config_reloads_total{outcome=\"applied\"} 0"));

  write(v2);
  CheckConfigFile(scaler, &watch);
  ASSERT_EQ(log.size(), 1U);
  EXPECT_EQ(log.back(), absl::StrCat("config ", path, " reloaded: chat changed"));
  EXPECT_EQ(scaler.config()->Find("chat")->policy.min_replicas, 2);
  EXPECT_TRUE(metric("tessera_scaler_config_reloads_total{outcome=\"applied\"} 1"));

  // An invalid edit: located, the config before kept, reported once however often it is read.
  write(text_of("  - {name: chat, queueQuery: w, readyQuery: r, minReplicas: -1}\n"));
  CheckConfigFile(scaler, &watch);
  CheckConfigFile(scaler, &watch);
  ASSERT_EQ(log.size(), 2U);
  EXPECT_THAT(log.back(),
              HasSubstr(absl::StrCat("config ", path, " changed and is not taken (", path, ":5:")));
  EXPECT_THAT(log.back(), HasSubstr("minReplicas"));
  EXPECT_THAT(log.back(), HasSubstr("serving the config read before"));
  EXPECT_EQ(scaler.config()->Find("chat")->policy.min_replicas, 2);
  EXPECT_TRUE(metric("tessera_scaler_config_reloads_total{outcome=\"invalid\"} 1"));
  EXPECT_TRUE(metric("tessera_scaler_config_current 0"));

  // Prometheus' settings changed: a restart is needed, said once.
  write(text_of("  - {name: chat, queueQuery: w, readyQuery: r}\n", ", timeout: 9s"));
  CheckConfigFile(scaler, &watch);
  CheckConfigFile(scaler, &watch);
  ASSERT_EQ(log.size(), 3U);
  EXPECT_THAT(log.back(), HasSubstr("restart the scaler to apply it"));
  EXPECT_TRUE(metric("tessera_scaler_config_reloads_total{outcome=\"needs_restart\"} 1"));
  EXPECT_EQ(scaler.config()->Find("chat")->policy.min_replicas, 2);

  // Back to what runs, laid out anew with a comment: taken, nothing changed, current again.
  write(absl::StrCat("# chat, as before\n", v2));
  CheckConfigFile(scaler, &watch);
  ASSERT_EQ(log.size(), 4U);
  EXPECT_EQ(log.back(), absl::StrCat("config ", path, " reloaded: no service changed"));
  EXPECT_TRUE(metric("tessera_scaler_config_current 1"));
  EXPECT_TRUE(metric("tessera_scaler_config_reloads_total{outcome=\"applied\"} 2"));

  // The file gone (a volume remounted): reported as invalid, the config kept.
  ASSERT_TRUE(std::filesystem::remove(path));
  CheckConfigFile(scaler, &watch);
  ASSERT_EQ(log.size(), 5U);
  EXPECT_THAT(log.back(), HasSubstr("no such file"));
  EXPECT_EQ(scaler.config()->Find("chat")->policy.min_replicas, 2);
}

TEST(Scaler, ReloadsWhilePollingAndServingViews) {
  absl::StatusOr<ScalerConfig> a = ReloadConfig("maxReplicas: 20");
  // chat's queries change too: each reload drops what it learned and asks for a rebuild, while a
  // poll or a rebuild may be reading the queries before.
  absl::StatusOr<ScalerConfig> b = ReloadConfig("maxReplicas: 4, runningQuery: running", "fresh");
  ASSERT_TRUE(a.ok() && b.ok());
  RealClock clock;
  ScriptedSource prom(clock);
  prom.values = {{"waiting", 40}, {"ready", 2}, {"o_waiting", 3}, {"o_ready", 1}};
  Scaler scaler(*a, prom, clock);
  std::atomic<bool> done{false};
  std::thread poller([&] {
    while (!done.load()) {
      scaler.PollOnce();
      scaler.Backfill();          // the source keeps no history: each service logs and goes on
      scaler.BackfillReloaded();  // the services the reloads added, as above
    }
  });
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(scaler.Reload(i % 2 == 0 ? *b : *a).ok());
    absl::StatusOr<ScalerView> v = scaler.View("chat");
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_LE(v->replicas, 20);
    const absl::StatusCode other = scaler.View("other").status().code();
    EXPECT_TRUE(other == absl::StatusCode::kOk || other == absl::StatusCode::kNotFound);
    EXPECT_THAT(scaler.MetricsText(), HasSubstr("tessera_scaler_desired_replicas"));
  }
  done = true;
  poller.join();
  // Whichever config came last, only its services are there.
  EXPECT_TRUE(scaler.View("other").ok());
  EXPECT_EQ(scaler.View("fresh").status().code(), absl::StatusCode::kNotFound);
}

TEST(Scaler, StreamIsActivePushesTheChangeFromIdleToActive) {
  absl::StatusOr<ScalerConfig> config = ConfigWith(
      "  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready, "
      "minReplicas: 0}\n",
      ", pollInterval: 100ms");
  ASSERT_TRUE(config.ok()) << config.status();
  RealClock clock;
  ScriptedSource prom(clock);
  prom.Set({{"waiting", 0}, {"running", 0}, {"ready", 0}});
  Scaler scaler(*config, prom, clock);
  testing::ServedScaler served(scaler);
  ASSERT_GT(served.port(), 0);

  auto stub = externalscaler::ExternalScaler::NewStub(
      grpc::CreateChannel(served.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  std::unique_ptr<grpc::ClientReader<externalscaler::IsActiveResponse>> stream =
      stub->StreamIsActive(&ctx, testing::ScaledObjectRefFor("chat"));
  externalscaler::IsActiveResponse r;
  // Idle at zero on fresh data: inactive (after the first poll; before it, unknown = active).
  bool saw_inactive = false;
  for (int i = 0; i < 50 && !saw_inactive; ++i) {
    ASSERT_TRUE(stream->Read(&r));
    saw_inactive = !r.result();
  }
  ASSERT_TRUE(saw_inactive);
  {
    std::lock_guard<std::mutex> l(prom.mu);
    prom.values["waiting"] = 5;
  }
  bool saw_active = false;
  for (int i = 0; i < 50 && !saw_active; ++i) {
    ASSERT_TRUE(stream->Read(&r));
    saw_active = r.result();
  }
  EXPECT_TRUE(saw_active);
  ctx.TryCancel();
  externalscaler::IsActiveResponse rest;
  while (stream->Read(&rest)) {
  }
  // An unknown service ends the stream with NOT_FOUND.
  grpc::ClientContext ctx2;
  auto bad = stub->StreamIsActive(&ctx2, testing::ScaledObjectRefFor("nope"));
  while (bad->Read(&rest)) {
  }
  EXPECT_EQ(bad->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

// Serving polls every interval on the scaler's clock; when the clock jumps forward (an NTP step,
// a suspended VM resumed) the polls it missed are skipped: one poll, not one per interval passed.
TEST(Scaler, ServingSkipsPollsMissedWhenTheClockJumps) {
  absl::StatusOr<ScalerConfig> config = ConfigWith(
      "  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready}\n",
      ", pollInterval: 5s");
  ASSERT_TRUE(config.ok()) << config.status();
  SimulatedClock clock(absl::FromUnixSeconds(1764700000));
  ScriptedSource prom(clock);
  prom.Set({{"waiting", 0}, {"running", 2}, {"ready", 1}});
  Scaler scaler(*config, prom, clock);
  auto queries = [&prom] {
    std::lock_guard<std::mutex> l(prom.mu);
    return prom.queries;
  };
  // Waits (up to 5 s) for `n` queries, then as long as a turn or two of the poll loop, so that
  // any poll beyond them would have begun; the count then.
  auto settle = [&](int n) {
    for (int i = 0; i < 500 && queries() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return queries();
  };
  testing::ServedScaler served(scaler);
  ASSERT_GT(served.port(), 0);
  const int per_poll = settle(1);  // the first poll, at once; the clock stands still after it
  ASSERT_GT(per_poll, 0);
  clock.Advance(absl::Hours(1));  // 720 intervals
  EXPECT_EQ(settle(2 * per_poll), 2 * per_poll);
  clock.Advance(absl::Seconds(4));  // the next poll is an interval after the one that ran late
  EXPECT_EQ(settle(0), 2 * per_poll);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(settle(3 * per_poll), 3 * per_poll);
  EXPECT_TRUE(served.Stop().ok());
}

// A clock that stands still (RealClock after the wall clock stepped back, until it catches up)
// does not stop the polls: one every two intervals of time slept.
TEST(Scaler, ServingPollsOnWhileTheClockStandsStill) {
  absl::StatusOr<ScalerConfig> config = ConfigWith(
      "  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready}\n",
      ", pollInterval: 100ms");
  ASSERT_TRUE(config.ok()) << config.status();
  SimulatedClock clock(absl::FromUnixSeconds(1764700000));  // never advanced
  ScriptedSource prom(clock);
  prom.Set({{"waiting", 40}, {"running", 16}, {"ready", 1}});
  Scaler scaler(*config, prom, clock);
  testing::ServedScaler served(scaler);
  ASSERT_GT(served.port(), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(served.Stop().ok());
  // About 1.5 s / 200 ms; at least the first poll and three more on a slow machine.
  EXPECT_THAT(scaler.MetricsText(),
              ::testing::ContainsRegex("tessera_scaler_polls_total\\{service=\"chat\"\\} "
                                       "([4-9]|[1-9][0-9])\n"));
  EXPECT_TRUE(scaler.View("chat")->fresh);  // on data sampled "now"
}

// The scrape a dashboard or alert reads: per service the decision, whether GetMetrics answers
// it, the signals behind it and the polls and queries that failed; KEDA's calls by code. Valid
// text exposition (each family's HELP and TYPE before its samples, label values escaped).
TEST(Scaler, MetricsShowDecisionsSignalsMissingDataAndRpcs) {
  absl::StatusOr<ScalerConfig> config =
      ConfigWith(R"(  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready,
     utilizationQuery: util, targetQueuePerReplica: 4, minReplicas: 1, staleAfter: 30s}
  - {name: 'we"ird\name', queueQuery: w_waiting, readyQuery: w_ready, minReplicas: 1}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  RealClock clock;
  ScriptedSource prom(clock);
  prom.values = {{"waiting", 40}, {"running", 16},  {"ready", 1},
                 {"util", 0.5},   {"w_waiting", 0}, {"w_ready", 2}};
  Scaler scaler(*config, prom, clock);
  scaler.PollOnce();
  std::string text = scaler.MetricsText();
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_desired_replicas{service=\"chat\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_fresh{service=\"chat\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_min_replicas{service=\"chat\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_max_replicas{service=\"chat\"} 100\n"));
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_signal{service=\"chat\",signal=\"waiting\"} 40\n"));
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_signal{service=\"chat\",signal=\"running\"} 16\n"));
  EXPECT_THAT(text,
              HasSubstr("\ntessera_scaler_signal{service=\"chat\",signal=\"utilization\"} 0.5\n"));
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_polls_total{service=\"chat\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_query_failures_total{service=\"chat\"} 0\n"));
  // A quote and a backslash in a service's name are escaped in its label. (2 ready, nothing
  // waiting: a scaler just started holds the replicas it found for one scale-down window.)
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_desired_replicas{service=\"we\\\"ird\\\\name\"} "
                              "2\n"));
  // No throughput query: no throughput signal.
  EXPECT_THAT(text, Not(HasSubstr("signal=\"throughput\"")));

  prom.down = true;
  scaler.PollOnce();
  text = scaler.MetricsText();
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_fresh{service=\"chat\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_desired_replicas{service=\"chat\"} 3\n"));  // held
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_polls_total{service=\"chat\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_polls_without_data_total{service=\"chat\"} 1\n"));
  // ready, waiting, running, utilisation and starting (the default from the deployment's name):
  // five queries failed.
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_query_failures_total{service=\"chat\"} 5\n"));
  EXPECT_THAT(text, Not(HasSubstr("service=\"chat\",signal=\"waiting\"")));

  // KEDA's calls, by method and code.
  testing::ServedScaler served(scaler);
  ASSERT_GT(served.port(), 0);
  auto stub = externalscaler::ExternalScaler::NewStub(
      grpc::CreateChannel(served.address(), grpc::InsecureChannelCredentials()));
  auto call = [&](const std::string& service) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    externalscaler::GetMetricsRequest req;
    *req.mutable_scaledobjectref() = testing::ScaledObjectRefFor(service);
    req.set_metricname(Scaler::MetricName(service));
    externalscaler::GetMetricsResponse out;
    return stub->GetMetrics(&ctx, req, &out).error_code();
  };
  // Down: the served scaler polls at once and finds no data, so GetMetrics is UNAVAILABLE.
  EXPECT_EQ(call("chat"), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(call("chat"), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(call("nope"), grpc::StatusCode::NOT_FOUND);
  {
    grpc::ClientContext ctx;
    externalscaler::GetMetricSpecResponse spec;
    EXPECT_TRUE(stub->GetMetricSpec(&ctx, testing::ScaledObjectRefFor("chat"), &spec).ok());
  }
  ASSERT_TRUE(served.Stop().ok());
  text = scaler.MetricsText();
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_grpc_requests_total{method=\"GetMetrics\","
                              "code=\"UNAVAILABLE\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_grpc_requests_total{method=\"GetMetrics\","
                              "code=\"NOT_FOUND\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\ntessera_scaler_grpc_requests_total{method=\"GetMetricSpec\","
                              "code=\"OK\"} 1\n"));

  // The format: every sample belongs to the family whose HELP and TYPE came last.
  std::string family;
  int samples = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "# HELP ")) {
      family = std::string(line.substr(0, line.find(' ')));
      continue;
    }
    if (absl::ConsumePrefix(&line, "# TYPE ")) {
      EXPECT_TRUE(absl::StartsWith(line, family + " ")) << line;
      EXPECT_TRUE(absl::EndsWith(line, " gauge") || absl::EndsWith(line, " counter")) << line;
      continue;
    }
    ++samples;
    EXPECT_TRUE(absl::StartsWith(line, family + "{") || absl::StartsWith(line, family + " "))
        << line << " after " << family;
    double value = 0;
    EXPECT_TRUE(absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) << line;
  }
  EXPECT_GE(samples, 20);  // 8 families x 2 services, 1 signal, 3 RPC counts
}

// A service with a batch job from minute 30 to 39 of every hour (200 running on 10 replicas and
// 40 waiting; else 2 running on one), as Prometheus holds it: instant queries at the time asked
// for, range queries at each step asked for. Records the range requests; `fail_range` fails those
// of one query.
class HourlyJobSource final : public MetricSource {
 public:
  static double Value(const std::string& promql, absl::Time t) {
    const int64_t minute = absl::ToUnixSeconds(t) / 60 % 60;
    const bool job = minute >= 30 && minute < 40;
    if (promql == "ready") return job ? 10 : 1;
    if (promql == "running") return job ? 200 : 2;
    if (promql == "waiting") return job ? 40 : 0;
    return 0;  // anything else (flat's queries)
  }
  absl::StatusOr<PromValue> Query(const std::string& promql, absl::Time at) override {
    RunOnce();
    PromValue v;
    v.sampled = at;
    v.value = Value(promql, at);
    return v;
  }
  absl::StatusOr<PromSeries> QueryRange(const std::string& promql, absl::Time start,
                                        absl::Duration step, int64_t count,
                                        const std::atomic<bool>* /*cancel*/) override {
    RunOnce();
    std::lock_guard<std::mutex> l(mu);
    ranges.push_back({promql, start, step, count});
    if (promql == fail_range) return absl::UnavailableError("query_range: no store answered");
    PromSeries out{start, step, {}};
    for (int64_t k = 0; k < count; ++k) out.points.push_back(Value(promql, start + k * step));
    return out;
  }
  struct Range {
    std::string query;
    absl::Time start;
    absl::Duration step;
    int64_t count;
  };
  // Runs `once` (when set) before the next query, instant or range, is answered, then drops it.
  void RunOnce() {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> l(mu);
      fn.swap(once);
    }
    if (fn) fn();
  }
  std::mutex mu;
  std::vector<Range> ranges;
  std::string fail_range;
  std::function<void()> once;
};

// Whether two scalers give `service` the same decision: count, reason and the instant decided for.
bool AnswerAlike(const Scaler& a, const Scaler& b, const std::string& service) {
  const absl::StatusOr<ScalerView> va = a.View(service);
  const absl::StatusOr<ScalerView> vb = b.View(service);
  return va.ok() && vb.ok() && va->replicas == vb->replicas && va->reason == vb->reason &&
         va->decided_at == vb->decided_at;
}

TEST(Scaler, ARestartedScalerRebuildsTheRecurringLoadFromPrometheus) {
  absl::StatusOr<ScalerConfig> config = ConfigWith(
      "  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready}\n"
      "  - {name: flat, queueQuery: flat-waiting, runningQuery: flat-running, readyQuery: "
      "flat-ready,\n"
      "     seasonalPeriods: []}\n");
  ASSERT_TRUE(config.ok()) << config.status();
  // Started at 12:27: the job comes at 12:30.
  const absl::Time started = absl::FromUnixSeconds(int64_t{1764700000} / 3600 * 3600) +
                             absl::Hours(12) + absl::Minutes(27);
  auto run = [&](HourlyJobSource& prom, SimulatedClock& clock, std::vector<std::string>& log,
                 bool backfill) {
    Scaler scaler(*config, prom, clock, [&](const std::string& line) { log.push_back(line); });
    scaler.PollOnce();  // the first poll may come before the history
    if (backfill) scaler.Backfill();
    std::string reason;
    int replicas = 0;
    for (int i = 0; i < 35; ++i) {  // polls up to 12:29:55
      clock.Advance(absl::Seconds(5));
      scaler.PollOnce();
      reason = scaler.View("chat")->reason;
      replicas = scaler.View("chat")->replicas;
    }
    return std::tuple{replicas, reason, scaler.MetricsText()};
  };

  SimulatedClock clock(started);
  HourlyJobSource prom;
  std::vector<std::string> log;
  auto [replicas, reason, metrics] = run(prom, clock, log, true);
  // 40 waiting and 200 running on 10 replicas: a batch of 20 each, plus the queue target of 4 ->
  // 10 busy replicas, sized to the 0.75 target -> 14, two minutes ahead (within the scale-up
  // steps: 1 -> 5 -> 10 -> 14).
  EXPECT_THAT(reason, HasSubstr("recurring: 10.0 replicas busy within 2m of this time in each of "
                                "the last 3 periods of 1h"));
  EXPECT_EQ(replicas, 14) << reason;
  EXPECT_THAT(log,
              ::testing::Contains(HasSubstr("chat: history rebuilt from Prometheus: 72h3m from ")));
  EXPECT_THAT(log,
              ::testing::Contains(HasSubstr(
                  "at 5s steps, 100.0% of them with the service's signals; batch 20 requests "
                  "per replica; scale-down window, idle clock and demand trend carried over")));
  // Without the seasonal rule, the last day (for the batch, which flat never shows).
  EXPECT_THAT(log,
              ::testing::Contains(HasSubstr("flat: history rebuilt from Prometheus: 24h from ")));
  EXPECT_THAT(log, ::testing::Contains(HasSubstr("batch not seen")));
  // The whole ring: 72 hours, the lead and a minute.
  EXPECT_THAT(metrics, HasSubstr("\ntessera_scaler_load_history_minutes{service=\"chat\"} 4323\n"));
  // The range asked for: every query of each service (with the utilisation and starting queries
  // that default from its name), at the poll interval, in requests Prometheus accepts, ending at
  // the step before the scaler started: 72 h 3 min for chat, a day for flat.
  std::map<std::string, int64_t> steps;
  auto span = [](const std::string& query) {
    return absl::StrContains(query, "flat") ? 24 * 720 : 72 * 720 + 36;
  };
  for (const HourlyJobSource::Range& r : prom.ranges) {
    EXPECT_EQ(r.step, absl::Seconds(5));
    EXPECT_LE(r.count, PromClient::kMaxRangePoints);
    EXPECT_EQ(r.start, started - (span(r.query) - steps[r.query]) * absl::Seconds(5)) << r.query;
    steps[r.query] += r.count;
  }
  EXPECT_EQ(steps.size(), 10u);
  for (const char* query : {"ready", "running", "waiting", "flat-ready"}) {
    EXPECT_EQ(steps[query], span(query)) << query;
  }
  for (const auto& [query, n] : steps) EXPECT_EQ(n, span(query)) << query;

  // Without it (a source that keeps no history, or one that fails), the job meets one replica.
  for (const std::string& fail : {std::string("running"), std::string("none")}) {
    SimulatedClock again(started);
    HourlyJobSource failing;
    failing.fail_range = fail;
    std::vector<std::string> lines;
    auto [n, why, text] = run(failing, again, lines, fail != "none");
    EXPECT_EQ(n, 1) << why;
    EXPECT_THAT(why, Not(HasSubstr("recurring")));
    EXPECT_THAT(text, HasSubstr("\ntessera_scaler_load_history_minutes{service=\"chat\"} 3\n"));
    if (fail == "running") {
      EXPECT_THAT(lines, ::testing::Contains("chat: history not rebuilt (running: query_range: no "
                                             "store answered); tried again in 10s (failed 1 "
                                             "time), meanwhile it builds up from its polls"));
    }
  }
  ScriptedSource plain(clock);
  std::vector<std::string> lines;
  Scaler scaler(*config, plain, clock, [&](const std::string& line) { lines.push_back(line); });
  scaler.Backfill();
  EXPECT_THAT(lines, ::testing::ElementsAre(HasSubstr("chat: history not rebuilt (ready: the "
                                                      "metric source keeps no history)"),
                                            HasSubstr("flat: history not rebuilt")));
}

// A rebuild that fails (Prometheus restarting with the scaler, a store not answering range
// queries) is tried again after 10 s, 20 s, 40 s... up to 5 minutes, the polls since the start kept
// meanwhile: once Prometheus answers, the history is rebuilt and the polls replayed onto it, and
// the scaler decides as one whose rebuild never failed. Logged at the first, second, fourth...
// failure and when the reason changes; given up once it has failed for as long as the history it
// would bring (the polls since hold it by then).
TEST(Scaler, AFailedRebuildIsTriedAgainUntilPrometheusAnswers) {
  absl::StatusOr<ScalerConfig> config = ConfigWith(
      "  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready}\n");
  ASSERT_TRUE(config.ok()) << config.status();
  const absl::Time started = absl::FromUnixSeconds(int64_t{1764700000} / 3600 * 3600) +
                             absl::Hours(12) + absl::Minutes(27);
  SimulatedClock clock(started);
  HourlyJobSource failing;  // range queries for `running` fail until 12:28
  failing.fail_range = "running";
  HourlyJobSource healthy;
  std::vector<std::string> log;
  Scaler a(*config, failing, clock, [&](const std::string& line) { log.push_back(line); });
  Scaler b(*config, healthy, clock);
  auto due = [](const Scaler& s) {
    return absl::StrContains(s.MetricsText(),
                             "\ntessera_scaler_history_rebuild_due{service=\"chat\"} 1\n");
  };
  a.PollOnce();
  b.PollOnce();
  a.Backfill();
  b.Backfill();
  EXPECT_TRUE(due(a));
  EXPECT_FALSE(due(b));
  int compared = 0;
  int differ = 0;
  while (clock.Now() < started + absl::Minutes(2) + absl::Seconds(55)) {  // to 12:29:55
    clock.Advance(absl::Seconds(5));
    if (clock.Now() == started + absl::Minutes(1)) {
      std::lock_guard<std::mutex> l(failing.mu);
      failing.fail_range.clear();
    }
    const bool rebuilt = !due(a);  // before this poll
    a.PollOnce();
    b.PollOnce();
    a.BackfillReloaded();  // as the serving loop does, every 100 ms
    if (!rebuilt) continue;
    ++compared;
    differ += AnswerAlike(a, b, "chat") ? 0 : 1;
  }
  // Failed at 12:27:00, :10, :30 (not logged: the same reason, the third time) and rebuilt at
  // 12:28:10, 70 s after the start, with the 14 polls before replayed.
  const std::string failed = "chat: history not rebuilt (running: query_range: no store answered)";
  EXPECT_THAT(log, ::testing::Contains(absl::StrCat(
                       failed,
                       "; tried again in 10s (failed 1 time), meanwhile it builds up from "
                       "its polls")));
  EXPECT_THAT(log, ::testing::Contains(
                       absl::StrCat(failed,
                                    "; tried again in 20s (failed 2 times), meanwhile it builds up "
                                    "from its polls")));
  EXPECT_EQ(std::count_if(log.begin(), log.end(),
                          [&](const std::string& l) { return absl::StartsWith(l, failed); }),
            2);
  EXPECT_THAT(log, ::testing::Contains(
                       ::testing::AllOf(HasSubstr("chat: history rebuilt from Prometheus: 72h3m"),
                                        HasSubstr("(after 3 failed tries); batch 20 requests"))));
  EXPECT_EQ(compared, 21);  // 12:28:15 to 12:29:55
  EXPECT_EQ(differ, 0);
  EXPECT_THAT(a.View("chat")->reason, HasSubstr("recurring: 10.0 replicas busy"));
  EXPECT_EQ(a.View("chat")->replicas, 14);

  // A store that never answers: tried every 5 minutes at most, and given up once it has failed for
  // as long as the history (72 h 3 min: three daily periods and the lead), which the polls since
  // then hold; nothing is asked after that.
  HourlyJobSource never;
  never.fail_range = "running";
  SimulatedClock day(started);
  std::vector<std::string> lines;
  Scaler c(*config, never, day, [&](const std::string& line) { lines.push_back(line); });
  c.PollOnce();
  c.Backfill();
  int tries = 1;
  int tried_after_72h = 0;
  for (int i = 0; i < 24 * 12 * 4; ++i) {  // four days of 5-minute steps
    day.Advance(absl::Minutes(5));
    const size_t asked = never.ranges.size();
    c.BackfillReloaded();
    const bool tried = never.ranges.size() > asked;
    tries += tried ? 1 : 0;
    tried_after_72h += tried && day.Now() - started > absl::Hours(72) + absl::Minutes(10) ? 1 : 0;
  }
  EXPECT_FALSE(due(c));
  EXPECT_THAT(lines.back(), HasSubstr("; failing for 72h5m, as long as the history it would "
                                      "bring, which its polls since hold: not tried again"));
  EXPECT_EQ(tried_after_72h, 0);
  EXPECT_GT(tries, 800);  // every 5 minutes once the backoff reaches its cap
}

// A config reload that adds a service, or changes a service's knobs so that the seasonal rule
// reads further back than the load history it kept (seasonalRepeats, seasonalPeriods), leaves
// that history to be rebuilt from Prometheus: the hourly job is then met ahead, as after a
// restart. Without the rebuild (backfill off, or not run) the job meets one replica, which shows
// what the rebuild gives. A change that reshapes the history's ring without reading further back
// (coldStart sets the rule's lead) keeps it, and needs no rebuild.
TEST(Scaler, AReloadRebuildsTheHistoryOfAServiceAddedOrReshaped) {
  const std::string chat =
      "  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready}\n";
  const std::string chat_2m =
      "  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready, "
      "coldStart: 2m}\n";
  const std::string hourly =
      "  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready, "
      "seasonalPeriods: [1h]}\n";
  const std::string hourly_4 =
      "  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready, "
      "seasonalPeriods: [1h], seasonalRepeats: 4}\n";
  const std::string flat = "  - {name: flat, queueQuery: flat-waiting, seasonalPeriods: []}\n";
  const absl::Time hour =
      absl::FromUnixSeconds(int64_t{1764700000} / 3600 * 3600) + absl::Hours(12);
  struct Run {
    int replicas = 0;
    std::string reason;
    std::string reloaded;  // what the last reload said
    std::vector<std::string> log;
    std::vector<HourlyJobSource::Range> ranges;  // asked for after the start
  };
  // Starts at 12:20 on configs[0] (its history rebuilt), reloads the others in turn at 12:22,
  // rebuilds what the reloads left after `rebuild_after` more polls (never when < 0), and polls
  // every 5 s up to 12:29:55, before the job at 12:30.
  auto run = [&](const std::vector<std::string>& configs, int rebuild_after,
                 const std::string& prometheus_extra = "") {
    Run out;
    std::vector<ScalerConfig> decoded;
    for (const std::string& services : configs) {
      absl::StatusOr<ScalerConfig> c = ConfigWith(services, prometheus_extra);
      EXPECT_TRUE(c.ok()) << c.status();
      if (!c.ok()) return out;
      decoded.push_back(*std::move(c));
    }
    SimulatedClock clock(hour + absl::Minutes(20));
    HourlyJobSource prom;
    Scaler scaler(decoded[0], prom, clock,
                  [&](const std::string& line) { out.log.push_back(line); });
    scaler.PollOnce();
    scaler.Backfill();
    for (int i = 0; i < 24; ++i) {
      clock.Advance(absl::Seconds(5));
      scaler.PollOnce();
    }
    prom.ranges.clear();
    for (size_t k = 1; k < decoded.size(); ++k) {
      out.reloaded = scaler.Reload(decoded[k]).value_or("refused");
    }
    for (int i = 0; i < 95; ++i) {
      if (i == rebuild_after) scaler.BackfillReloaded();
      clock.Advance(absl::Seconds(5));
      scaler.PollOnce();
    }
    EXPECT_EQ(clock.Now(), hour + absl::Minutes(29) + absl::Seconds(55));
    out.replicas = scaler.View("chat").ok() ? scaler.View("chat")->replicas : -1;
    out.reason = scaler.View("chat").ok() ? scaler.View("chat")->reason : "";
    out.ranges = prom.ranges;
    return out;
  };

  // Added: rebuilt as at a restart, whole (72 h 3 min at 5 s steps), before its first poll.
  Run added = run({flat, flat + chat}, 0);
  EXPECT_EQ(added.reloaded, "chat added, its history to be rebuilt");
  EXPECT_THAT(added.reason, HasSubstr("recurring: 10.0 replicas busy within 2m of this time in "
                                      "each of the last 3 periods of 1h"));
  EXPECT_EQ(added.replicas, 14) << added.reason;
  EXPECT_THAT(added.log,
              ::testing::Contains(HasSubstr("chat: history rebuilt from Prometheus: 72h3m from ")));
  // Only chat's queries were asked for: flat, kept, was not rebuilt again.
  ASSERT_FALSE(added.ranges.empty());
  for (const HourlyJobSource::Range& r : added.ranges) {
    EXPECT_FALSE(absl::StrContains(r.query, "flat")) << r.query;
  }
  Run added_only_polled = run({flat, flat + chat}, -1);
  EXPECT_EQ(added_only_polled.replicas, 1) << added_only_polled.reason;

  // Four hourly repeats where there were three: the rule reads 4 h back, and the history kept
  // (3 h 3 min, the ring of three) does not reach. The rebuild (two polls later, as the serving
  // loop's polls go on meanwhile) replays a day under the new knobs into what those polls kept.
  Run further = run({hourly + flat, hourly_4 + flat}, 2);
  EXPECT_EQ(further.reloaded, "chat changed, its load history kept, further back to be rebuilt");
  EXPECT_THAT(further.reason, HasSubstr("recurring: 10.0 replicas busy within 2m of this time in "
                                        "each of the last 4 periods of 1h"));
  EXPECT_EQ(further.replicas, 14) << further.reason;
  EXPECT_THAT(further.log, ::testing::Contains(HasSubstr(
                               "chat: load history (further back) rebuilt from Prometheus: 24h "
                               "from ")));
  Run further_only_polled = run({hourly + flat, hourly_4 + flat}, -1);
  EXPECT_EQ(further_only_polled.replicas, 1) << further_only_polled.reason;
  EXPECT_THAT(further_only_polled.reason, Not(HasSubstr("recurring")));

  // coldStart 1m -> 2m: the lead, and so the ring's span, changes, but the rule reads no further
  // back; the history kept serves the new lead at once, and nothing is asked for.
  Run slower = run({chat + flat, chat_2m + flat}, 0);
  EXPECT_EQ(slower.reloaded, "chat changed");
  EXPECT_TRUE(slower.ranges.empty());
  EXPECT_THAT(slower.reason, HasSubstr("recurring: 10.0 replicas busy within 3m of this time"));
  EXPECT_EQ(slower.replicas, 14) << slower.reason;

  // A change that keeps the history's span (a ceiling) leaves nothing to rebuild.
  Run ceiling = run({chat + flat,
                     "  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: "
                     "ready, maxReplicas: 30}\n" +
                         flat},
                    0);
  EXPECT_EQ(ceiling.reloaded, "chat changed");
  EXPECT_TRUE(ceiling.ranges.empty());
  EXPECT_EQ(ceiling.replicas, 14) << ceiling.reason;

  // With backfill off the reload says the history further back fills from now, and nothing is
  // asked for; the history kept still serves a change that reads no further back.
  Run off = run({hourly + flat, hourly_4 + flat}, 0, ", backfill: false");
  EXPECT_EQ(off.reloaded, "chat changed, its load history kept, further back fills from now");
  EXPECT_TRUE(off.ranges.empty());
  EXPECT_EQ(off.replicas, 1) << off.reason;
  Run off_slower = run({chat + flat, chat_2m + flat}, 0, ", backfill: false");
  EXPECT_EQ(off_slower.reloaded, "chat changed");
  EXPECT_EQ(off_slower.replicas, 14) << off_slower.reason;
  EXPECT_EQ(run({flat, flat + chat}, 0, ", backfill: false").reloaded, "chat added");

  // Added, then removed before its rebuild: nothing is asked for it.
  Run gone = run({flat, flat + chat, flat}, 0);
  EXPECT_EQ(gone.reloaded, "chat removed");
  EXPECT_TRUE(gone.ranges.empty());
  EXPECT_EQ(gone.replicas, -1);
}

// A reload that changes what a service's queries read drops what it learned from the old series
// (its load history, batch, scale-down window): it holds the replicas it finds, as a restarted
// scaler does, and its history is rebuilt from the new series with the polls since replayed onto
// it. From then on it decides as a replica started with the new config at the reload, poll for
// poll. Scaler A starts at 12:20 on `from` and is reloaded with `to` at 12:22 (or, `when`, while
// its start's rebuild or a poll reads the old queries); B starts on `to` then. The hourly job
// comes at 12:30; the last poll is at 12:29:55.
TEST(Scaler, AReloadThatChangesAServicesQueriesRelearnsFromTheNewSeries) {
  const std::string job =
      "  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready}\n";
  const std::string flat =
      "  - {name: chat, queueQuery: flat-waiting, runningQuery: flat-running, readyQuery: "
      "ready}\n";
  const absl::Time hour =
      absl::FromUnixSeconds(int64_t{1764700000} / 3600 * 3600) + absl::Hours(12);
  enum class When { kBetweenPolls, kInStartRebuild, kInPoll };
  struct Run {
    std::string reloaded;
    std::vector<std::string> log;
    int replicas = 0;
    std::string reason;
    int compared = 0;                 // polls at which A and B both answered after A's rebuild
    int differ = 0;                   // of those, the ones at which they did not answer alike
    absl::Time decided_after_reload;  // A's decision time right after the reload
  };
  // A's reloaded services are rebuilt `rebuild_after` polls after the reload (never when < 0).
  auto run = [&](const std::string& from, const std::string& to, int rebuild_after, When when,
                 const std::string& prometheus_extra = "") {
    Run out;
    absl::StatusOr<ScalerConfig> before = ConfigWith(from, prometheus_extra);
    absl::StatusOr<ScalerConfig> after = ConfigWith(to, prometheus_extra);
    EXPECT_TRUE(before.ok() && after.ok());
    if (!before.ok() || !after.ok()) return out;
    SimulatedClock clock(hour + absl::Minutes(20));
    HourlyJobSource prom;
    Scaler a(*before, prom, clock, [&](const std::string& line) { out.log.push_back(line); });
    std::unique_ptr<Scaler> b;
    auto reload = [&] {
      out.reloaded = a.Reload(*after).value_or("refused");
      b = std::make_unique<Scaler>(*after, prom, clock);
      b->PollOnce();  // its first poll comes before its history, as in a restart
      if (after->backfill) b->Backfill();
    };
    a.PollOnce();
    if (when == When::kInStartRebuild) prom.once = reload;
    a.Backfill();
    int polls = 0;
    bool rebuilt = false;
    while (clock.Now() < hour + absl::Minutes(29) + absl::Seconds(55)) {
      clock.Advance(absl::Seconds(5));
      const bool reloading = b == nullptr && clock.Now() == hour + absl::Minutes(22);
      if (reloading && when == When::kInPoll) prom.once = reload;
      a.PollOnce();
      if (reloading && when == When::kBetweenPolls) reload();
      if (reloading) out.decided_after_reload = a.View("chat")->decided_at;
      if (b == nullptr) continue;
      if (!reloading) b->PollOnce();
      if (polls++ == rebuild_after) {
        a.BackfillReloaded();
        rebuilt = true;
        continue;  // compared from the next poll
      }
      if (!rebuilt) continue;
      ++out.compared;
      if (!AnswerAlike(a, *b, "chat") && out.differ++ == 0) {
        ADD_FAILURE() << "first difference at " << clock.Now() << ": A "
                      << a.View("chat").value_or(ScalerView{}).reason << ", B "
                      << b->View("chat").value_or(ScalerView{}).reason;
      }
    }
    out.replicas = a.View("chat")->replicas;
    out.reason = a.View("chat")->reason;
    return out;
  };

  // A flat queue, then the job's: rebuilt from the job's series, it meets the job ahead, and
  // decides as B does, whether the rebuild comes before the next poll or after two.
  for (int rebuild_after : {0, 2}) {
    Run to_job = run(flat, job, rebuild_after, When::kBetweenPolls);
    EXPECT_EQ(to_job.reloaded,
              "chat changed its queries: what it learned is dropped, its history to be rebuilt "
              "from the new queries");
    EXPECT_THAT(to_job.reason, HasSubstr("recurring: 10.0 replicas busy within 2m of this time "
                                         "in each of the last 3 periods of 1h"));
    EXPECT_EQ(to_job.replicas, 14) << to_job.reason;
    EXPECT_EQ(to_job.compared, 95 - rebuild_after);  // to 12:29:55
    EXPECT_EQ(to_job.differ, 0);
    EXPECT_EQ(to_job.decided_after_reload, hour + absl::Minutes(22));
  }

  // The job's queue, then a flat one: the job's history is dropped, not met ahead. Rebuilt, the
  // new series show a day without a request: idle past idleTimeout, at zero. Not rebuilt, it holds
  // the replica it found for the scale-down window.
  Run to_flat = run(job, flat, 2, When::kBetweenPolls);
  EXPECT_EQ(to_flat.replicas, 0) << to_flat.reason;
  EXPECT_THAT(to_flat.reason, Not(HasSubstr("recurring")));
  EXPECT_EQ(to_flat.compared, 93);
  EXPECT_EQ(to_flat.differ, 0);
  Run to_flat_unrebuilt = run(job, flat, -1, When::kBetweenPolls);
  EXPECT_EQ(to_flat_unrebuilt.replicas, 1) << to_flat_unrebuilt.reason;
  // Without backfill nothing is rebuilt: it learns from the reload on.
  Run off = run(job, flat, -1, When::kBetweenPolls, ", backfill: false");
  EXPECT_EQ(off.reloaded,
            "chat changed its queries: what it learned is dropped, it learns from now");
  EXPECT_EQ(off.replicas, 1) << off.reason;

  // The start's rebuild, reading the flat queries when the reload comes, is let go; the one the
  // reload asked for reads the job's.
  Run in_rebuild = run(flat, job, 2, When::kInStartRebuild);
  EXPECT_THAT(in_rebuild.log,
              ::testing::Contains("chat: history from the queries before the reload let go"));
  EXPECT_EQ(in_rebuild.replicas, 14) << in_rebuild.reason;
  EXPECT_EQ(in_rebuild.compared, 116);  // from 12:20:15
  EXPECT_EQ(in_rebuild.differ, 0);

  // A poll whose flat queries were running when the reload came is let go: the decision shown is
  // still the one before (12:22's when the reload comes between polls, above).
  Run in_poll = run(flat, job, 2, When::kInPoll);
  EXPECT_EQ(in_poll.decided_after_reload, hour + absl::Minutes(21) + absl::Seconds(55));
  EXPECT_EQ(in_poll.replicas, 14) << in_poll.reason;
  EXPECT_EQ(in_poll.compared, 93);
  EXPECT_EQ(in_poll.differ, 0);
}

// Two replicas of the scaler behind one Service (KEDA's channel sends each call to either)
// decide alike: each poll decides for the last multiple of the poll interval (PollInstant),
// whenever in the interval it runs, and a replica started later replays from the range queries
// the instants the other polled. Replica A runs from 12:27 (its history rebuilt); B starts at
// 12:34:02.7, inside the hourly job, and again at 12:47:01.3 (a restart, within the hold after
// the job); each interval A polls 0.4 s and B 3.1 s into it. Through 13:45, over the next job,
// both give the same count at every poll once B's history is rebuilt: the polls B made before
// (the first) are replayed onto it.
TEST(Scaler, ReplicasPollingTheSamePrometheusDecideAlike) {
  absl::StatusOr<ScalerConfig> config = ConfigWith(
      "  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready}\n");
  ASSERT_TRUE(config.ok()) << config.status();
  const absl::Time hour =
      absl::FromUnixSeconds(int64_t{1764700000} / 3600 * 3600) + absl::Hours(12);
  HourlyJobSource prom;
  SimulatedClock clock(hour + absl::Minutes(27) + absl::Milliseconds(400));
  Scaler a(*config, prom, clock);
  a.PollAt(a.PollInstant(clock.Now()));
  a.Backfill();
  std::unique_ptr<Scaler> b;
  int compared = 0, differed = 0, changes = 0, last = -1;
  std::string first_difference;
  for (absl::Time grid = hour + absl::Minutes(27); grid < hour + absl::Minutes(105);
       grid += absl::Seconds(5)) {
    clock.Advance(grid + absl::Milliseconds(400) - clock.Now());
    a.PollAt(a.PollInstant(clock.Now()));
    ASSERT_EQ(a.View("chat")->decided_at, grid);
    bool started = false;
    for (const absl::Time start : {hour + absl::Minutes(34) + absl::Milliseconds(2700),
                                   hour + absl::Minutes(47) + absl::Milliseconds(1300)}) {
      if (grid + absl::Milliseconds(400) < start && start < grid + absl::Seconds(5)) {
        clock.Advance(start - clock.Now());
        // As ServeScaler starts: the first poll at once, then the history.
        b = std::make_unique<Scaler>(*config, prom, clock);
        b->PollAt(b->PollInstant(clock.Now()));
        b->Backfill();
        started = true;
      }
    }
    // B's first poll comes before its history (as ServeScaler's does): it holds the count the
    // service runs (here `ready`, which this source does not let follow A's decision).
    if (b == nullptr || started) continue;
    clock.Advance(grid + absl::Milliseconds(3100) - clock.Now());
    b->PollAt(b->PollInstant(clock.Now()));
    const ScalerView va = *a.View("chat"), vb = *b->View("chat");
    ++compared;
    changes += va.replicas != last ? 1 : 0;
    last = va.replicas;
    if (va.replicas != vb.replicas || va.decided_at != vb.decided_at) {
      if (differed++ == 0) {
        first_difference = absl::StrCat(absl::FormatTime(grid), ": A ", va.replicas, " (",
                                        va.reason, "), B ", vb.replicas, " (", vb.reason, ")");
      }
    }
  }
  EXPECT_EQ(differed, 0) << "of " << compared << "; first: " << first_difference;
  EXPECT_EQ(compared, 71 * 12 - 2);  // 12:34:05 to 13:44:55, but 12:47:00
  EXPECT_GE(changes, 4) << "the job came and went: scale-ups and downs compared";
}

// A scaler stopped (the pod's SIGTERM in a rollout) while its backfill waits on a slow range
// query stops at once: the query is cancelled, not waited for up to backfillTimeout, which would
// outlast the kubelet's grace period and end in SIGKILL. A service whose history was cut short
// logs nothing (it is not a failure of Prometheus).
TEST(Scaler, AShutdownCancelsTheBackfillsRangeQuery) {
  std::atomic<int> ranges{0};
  std::atomic<bool> release{false};
  testing::LocalHttpServer server([&](httplib::Server& s) {
    s.Get("/api/v1/query", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(
          R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1764700000,"1"]}]}})",
          "application/json");
    });
    s.Get("/api/v1/query_range", testing::SlowEmptyRange(ranges, release));
  });
  absl::StatusOr<ScalerConfig> config = DecodeScalerConfig(
      "s.yaml", absl::StrCat("apiVersion: tessera.io/v1alpha1\nkind: ScalerConfig\n"
                             "prometheus: {url: \"",
                             server.url(), "\", pollInterval: 100ms, backfillTimeout: 1m}\n",
                             "services:\n  - {name: chat, queueQuery: waiting}\n"));
  ASSERT_TRUE(config.ok()) << config.status();
  RealClock clock;
  PromSource prom(config->prometheus);
  std::mutex mu;
  std::vector<std::string> log;
  Scaler scaler(*config, prom, clock, [&](const std::string& line) {
    std::lock_guard<std::mutex> l(mu);
    log.push_back(line);
  });
  testing::ServedScaler served(scaler);
  ASSERT_GT(served.port(), 0);
  for (int i = 0; i < 500 && ranges.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(ranges.load(), 1);
  const auto began = std::chrono::steady_clock::now();
  EXPECT_TRUE(served.Stop().ok());
  const auto took = std::chrono::steady_clock::now() - began;
  release = true;
  // The gRPC server's own shutdown allows 2 s; the range query stops within about a second.
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_EQ(ranges.load(), 1);
  std::lock_guard<std::mutex> l(mu);
  EXPECT_THAT(log, ::testing::Not(::testing::Contains(HasSubstr("history"))));
  EXPECT_THAT(log, ::testing::Contains(HasSubstr("chat: 1 replicas")));
}

}  // namespace
}  // namespace tessera::adapters
