// libFuzzer target: `tessera scaler`'s untrusted inputs and its policy. Prometheus answers
// (ParsePromResponse and ParsePromRangeResponse, under any HTTP status), cloud identity token
// answers (ParseCloudTokenAnswer), scaler configs (DecodeScalerConfig) and the edit of one
// (SetListItemScalars, as `sim autoscale --write-config` makes it) return a value or a Status for
// any input, never crash or hang; what they accept keeps its documented promises (a value is a
// finite number; every decoded service's policy validates). Then the policy itself, on signals
// decoded from the same bytes, keeps its own: the decision stays within [minReplicas, maxReplicas],
// and on missing or stale data it neither lowers the count nor goes to zero. KEDA ScaledObjects
// checked against a config (CheckScaledObjects) give a report or a Status.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "adapters/k8s/yaml_reader.h"
#include "adapters/keda/scaledobject_check.h"
#include "adapters/keda/scaler_config.h"
#include "adapters/net/cloud_tokens.h"
#include "adapters/prometheus/prom_client.h"
#include "autoscale/policy.h"

namespace {

using tessera::autoscale::AutoscalePolicy;
using tessera::autoscale::AutoscaleState;
using tessera::autoscale::Decision;
using tessera::autoscale::Sample;
using tessera::autoscale::Signals;

// Reads the fuzzer's bytes as a stream of small numbers.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t Next() { return pos_ < size_ ? data_[pos_++] : 0; }
  // A signal sample: absent, stale, from the future, NaN, negative, or fresh with a value.
  Sample NextSample(absl::Time now) {
    uint8_t kind = Next();
    double v = Next() * (1 + Next() % 4);
    switch (kind % 8) {
      case 0:
        return Sample{};
      case 1:
        return Sample::At(v, now - absl::Minutes(5));
      case 2:
        return Sample::At(v, now + absl::Minutes(1));
      case 3:
        return Sample::At(std::nan(""), now);
      case 4:
        return Sample::At(-v - 1, now);
      default:
        return Sample::At(v, now - absl::Seconds(kind % 30));
    }
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// The documented meaning of fresh (docs/autoscaling.md), restated here as the oracle.
bool Fresh(const Sample& s, const AutoscalePolicy& p, absl::Time now) {
  return s.present && std::isfinite(s.value) && s.value >= 0 && now - s.at <= p.stale_after &&
         s.at <= now + absl::Seconds(5);
}

void DrivePolicy(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  AutoscalePolicy p;
  p.min_replicas = in.Next() % 4;
  p.max_replicas = std::max(1, p.min_replicas) + in.Next() % 40;
  p.target_queue_per_replica = 1 + in.Next() % 16;
  p.scale_up_step = 1 + in.Next() % 8;
  p.scale_down_step = 1 + in.Next() % 8;
  p.scale_down_window = absl::Seconds(in.Next() % 8 * 30);
  p.idle_timeout = absl::Seconds(in.Next() % 8 * 30);
  // Seasonal periods short enough for the run (up to ~2 hours) to hold several of them.
  p.seasonal_periods = {absl::Minutes(1 + in.Next() % 12), absl::Minutes(5 + in.Next() % 40)};
  p.seasonal_repeats = 1 + in.Next() % 4;
  p.scale_down_quantile = (1 + in.Next() % 20) / 20.0;  // 0.05 to 1
  if (!p.Validate().ok()) __builtin_trap();
  AutoscaleState state;
  absl::Time now = absl::FromUnixSeconds(1700000000);
  for (int step = 0; step < 256 && !in.empty(); ++step) {
    now += absl::Seconds(1 + in.Next() % 30);
    Signals s;
    s.waiting = in.NextSample(now);
    s.running = in.NextSample(now);
    s.utilization = in.NextSample(now);
    s.ready = in.NextSample(now);
    s.starting = in.NextSample(now);
    s.throughput = in.NextSample(now);
    if (s.utilization.present) s.utilization.value /= 255;
    const int before = state.current;
    const bool had_state = state.initialised;
    Decision d = tessera::autoscale::DecideReplicas(p, s, state, now);
    if (d.replicas < p.min_replicas || d.replicas > p.max_replicas) __builtin_trap();
    if (d.replicas != state.current) __builtin_trap();
    const bool data_ok =
        Fresh(s.waiting, p, now) && Fresh(s.running, p, now) && Fresh(s.ready, p, now);
    if (d.data_ok != data_ok) __builtin_trap();
    if (!data_ok) {
      // Never lower (unless above the maximum), never zero, on data it does not have.
      if (d.replicas == 0) __builtin_trap();
      if (had_state && d.replicas < std::min(before, p.max_replicas)) __builtin_trap();
    }
    if (d.reason.empty()) __builtin_trap();
  }
  // A history merged into itself (a replay of what the live state saw) changes nothing of what
  // it saw: the load ring, the window's recommendations (none twice), the idle clock, the
  // trend's samples (none twice) and the last queue.
  const AutoscaleState same = state;
  tessera::autoscale::MergeHistory(p, same, state);
  if (state.load_by_minute != same.load_by_minute || state.first_minute != same.first_minute ||
      state.last_minute != same.last_minute || state.recommendations != same.recommendations ||
      state.last_busy != same.last_busy || state.demand != same.demand ||
      state.last_waiting != same.last_waiting) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera::adapters;
  std::string text(reinterpret_cast<const char*>(data), size);
  long status = size > 0 ? (data[0] % 2 == 0 ? 200 : 400 + data[0] % 200) : 200;
  absl::StatusOr<PromValue> v = ParsePromResponse(status, text);
  if (v.ok() && !v->empty && !std::isfinite(v->value)) __builtin_trap();
  // A range query's answer: `count` steps or an error, whatever the body.
  const int64_t count = size > 1 ? data[1] % 64 : 0;
  absl::StatusOr<std::vector<std::optional<double>>> range =
      ParsePromRangeResponse(status, text, absl::FromUnixSeconds(1000), absl::Seconds(10), count);
  if (range.ok() && static_cast<int64_t>(range->size()) != count) __builtin_trap();
  // A cloud identity's token answer: a token that expires after `now`, or an error.
  const absl::Time now = absl::FromUnixSeconds(1796968000);
  absl::StatusOr<AccessToken> token =
      ParseCloudTokenAnswer("fuzz", size > 2 && data[2] % 8 == 0 ? 401 : 200, text, now);
  if (token.ok() && (token->token.empty() || token->expiration <= now)) __builtin_trap();
  absl::StatusOr<ScalerConfig> c = DecodeScalerConfig("fuzz.yaml", text);
  if (c.ok()) {
    for (const ServiceConfig& s : c->services) {
      if (!s.policy.Validate().ok() || s.name.empty()) __builtin_trap();
      if (c->Find(s.name) == nullptr) __builtin_trap();
    }
  }
  // `sim autoscale --write-config`'s edit: for any text a value or a Status; on a config that
  // decodes, setting a service's knobs to the values they have (written in full) gives a config
  // that decodes to the same knobs, the other services' unchanged.
  const size_t item = size > 3 ? data[3] % 4 : 0;
  if (c.ok() && item < c->services.size()) {
    const AutoscalePolicy& p = c->services[item].policy;
    absl::StatusOr<std::string> edited = tessera::adapters::SetListItemScalars(
        "fuzz.yaml", text, "services", item,
        {{"targetUtilization", absl::StrFormat("%.17g", p.target_utilization)},
         {"minReplicas", absl::StrCat(p.min_replicas)},
         {"scaleDownWindow", absl::FormatDuration(p.scale_down_window)}});
    if (edited.ok()) {
      absl::StatusOr<ScalerConfig> again = DecodeScalerConfig("fuzz.yaml", *edited);
      if (!again.ok() || again->services.size() != c->services.size()) __builtin_trap();
      for (size_t i = 0; i < c->services.size(); ++i) {
        const AutoscalePolicy& a = c->services[i].policy;
        const AutoscalePolicy& b = again->services[i].policy;
        if (c->services[i].name != again->services[i].name ||
            a.target_utilization != b.target_utilization || a.min_replicas != b.min_replicas ||
            a.scale_down_window != b.scale_down_window || a.max_replicas != b.max_replicas) {
          __builtin_trap();
        }
      }
    }
  } else {
    (void)tessera::adapters::SetListItemScalars("fuzz.yaml", text, "services", item,
                                                {{"minReplicas", "1"}});
  }
  // `scaler --check-scaledobjects`: any text against the config it decoded (or a fixed one) gives
  // a report or a Status; each finding names one of the report's objects and where it is.
  static const ScalerConfig kPairing = [] {
    absl::StatusOr<ScalerConfig> fixed = DecodeScalerConfig(
        "pair.yaml",
        "apiVersion: tessera.io/v1alpha1\nkind: ScalerConfig\nprometheus: {url: "
        "\"http://127.0.0.1:9090\"}\nservices:\n  - {name: chat, server: vllm}\n");
    if (!fixed.ok()) __builtin_trap();
    return *fixed;
  }();
  absl::StatusOr<PairingReport> pairing =
      CheckScaledObjects(c.ok() ? *c : kPairing, "fuzz.yaml", text);
  if (pairing.ok()) {
    if (pairing->objects.empty()) __builtin_trap();
    for (const PairingFinding& f : pairing->findings) {
      if (f.object >= pairing->objects.size() || f.where.empty()) __builtin_trap();
    }
  }
  DrivePolicy(data, size);
  return 0;
}
