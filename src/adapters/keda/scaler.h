// `tessera scaler`: polls each service's signals from Prometheus on the Clock, decides its
// replica count with autoscale::DecideReplicas, and serves the cached decision to KEDA over
// the external-scaler gRPC protocol (proto/externalscaler.proto).
//
//   GetMetricSpec  static: one metric per service, "tessera-<service>", target 1 (int and float)
//   GetMetrics     the cached decision as the metric value (int and float): with target 1 and
//                  metricType AverageValue, HPA's ceil(value / 1) is exactly the decision.
//                  UNAVAILABLE when the data behind it is missing or stale, so KEDA's fallback
//                  replicas apply.
//   IsActive       decision > 0; true whenever data is missing or stale (never to zero blind)
//   StreamIsActive the same, pushed every poll interval
// The ScaledObject names the service with the scaler metadata key `service`; an unknown one is
// NOT_FOUND, a missing key INVALID_ARGUMENT.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "adapters/keda/scaler_config.h"
#include "adapters/prometheus/prom_client.h"
#include "autoscale/policy.h"
#include "base/clock.h"

namespace tessera::adapters {

// Query may be called from several threads at once (the scaler polls services concurrently).
class MetricSource {
 public:
  virtual ~MetricSource() = default;
  virtual absl::StatusOr<PromValue> Query(const std::string& promql) = 0;
};

class PromSource final : public MetricSource {
 public:
  explicit PromSource(PromConfig c) : client_(std::move(c)) {}
  absl::StatusOr<PromValue> Query(const std::string& promql) override {
    return client_.Query(promql);
  }

 private:
  PromClient client_;
};

struct ScalerView {
  int replicas = 0;
  std::string reason;
  absl::Time decided_at = absl::InfinitePast();
  bool data_ok = false;
  bool fresh = false;  // data_ok and decided within the service's staleAfter
};

class Scaler {
 public:
  // `log`, when given, receives one line per service whenever its decision changes (the count,
  // or whether it rests on fresh data), with the reason: what an operator reads to see why.
  using LogSink = std::function<void(const std::string& line)>;
  Scaler(ScalerConfig config, MetricSource& source, const Clock& clock, LogSink log = nullptr);

  // Queries every service's signals and decides, config().poll_concurrency services at once.
  // Called every poll interval.
  void PollOnce();
  // NotFound for an unknown service.
  absl::StatusOr<ScalerView> View(const std::string& service) const;
  // Prometheus' text exposition (version 0.0.4) of what the scaler decided and saw, per
  // service, and of the RPCs it answered: for dashboards of decision against actual replicas and
  // alerts on missing data (docs/autoscaling.md lists the metrics).
  std::string MetricsText() const;
  // Counts an answered RPC by method and gRPC status code name (e.g. "GetMetrics", "OK").
  void CountRpc(const std::string& method, const std::string& code);
  const ScalerConfig& config() const { return config_; }
  const Clock& clock() const { return clock_; }
  static std::string MetricName(const std::string& service) { return "tessera-" + service; }

 private:
  struct Service {
    autoscale::AutoscaleState state;
    ScalerView view;
    autoscale::Signals last;         // the signals of the last poll (absent ones not present)
    int64_t polls = 0;               // 0: not polled yet
    int64_t polls_without_data = 0;  // decided without fresh data (held)
    int64_t query_failures = 0;      // a query failed or found no series where one is needed
  };
  // One service's queries and decision; its log line if the decision changed, else "".
  std::string PollService(const ServiceConfig& cfg);
  // A decision GetMetrics may answer: made on fresh data, and not older than staleAfter.
  static bool FreshAt(const ScalerView& v, const ServiceConfig& cfg, absl::Time now);
  // Counts into *failures a query that gives no sample.
  autoscale::Sample Read(const std::string& query, bool empty_is_zero, std::string* problems,
                         int64_t* failures);

  ScalerConfig config_;
  MetricSource& source_;
  const Clock& clock_;
  LogSink log_;
  mutable absl::Mutex mu_;
  std::map<std::string, Service> services_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, int64_t> rpcs_ ABSL_GUARDED_BY(mu_);
};

// Serves `scaler` on `listen` (host:port; port 0 = any, reported in *bound_port) until *stop,
// polling every config().poll_interval. TLS when the config names a certificate and key.
absl::Status ServeScaler(Scaler& scaler, const std::string& listen, const std::atomic<bool>* stop,
                         std::atomic<int>* bound_port = nullptr);

}  // namespace tessera::adapters
