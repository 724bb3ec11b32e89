// The scaler's poll loop on a simulated clock with scripted signals: what it logs (one line per
// change of decision, with the reason) and what it answers after Prometheus fails.
#include "adapters/keda/scaler.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;

// Answers each query with the number the test set; Unavailable while `down`.
class ScriptedSource final : public MetricSource {
 public:
  explicit ScriptedSource(const Clock& clock) : clock_(clock) {}
  absl::StatusOr<PromValue> Query(const std::string& promql) override {
    if (down) return absl::UnavailableError("GET http://prom/api/v1/query: Connection refused");
    PromValue v;
    v.value = values[promql];
    v.sampled = clock_.Now();
    return v;
  }
  std::map<std::string, double> values;
  bool down = false;

 private:
  const Clock& clock_;
};

TEST(Scaler, LogsEachChangeOfDecisionWithItsReason) {
  absl::StatusOr<ScalerConfig> config =
      DecodeScalerConfig("s.yaml", R"(apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus: {url: "http://prom:9090"}
services:
  - {name: chat, queueQuery: waiting, runningQuery: running, readyQuery: ready,
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

}  // namespace
}  // namespace tessera::adapters
