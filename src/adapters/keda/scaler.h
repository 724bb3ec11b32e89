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
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "adapters/keda/scaler_config.h"
#include "adapters/net/tls_files.h"
#include "adapters/prometheus/prom_client.h"
#include "autoscale/policy.h"
#include "base/clock.h"
#include "base/mutex.h"

namespace tessera::adapters {

// Query may be called from several threads at once (the scaler polls services concurrently).
class MetricSource {
 public:
  virtual ~MetricSource() = default;
  // The query evaluated at `at`: the scaler asks at the instant it decides for, so that scalers
  // polling the same Prometheus are answered alike.
  virtual absl::StatusOr<PromValue> Query(const std::string& promql, absl::Time at) = 0;
  // The query evaluated at `count` steps from `start`, for the history a restarted scaler
  // rebuilds; a source without history answers Unimplemented. Once *cancel (when given) is set,
  // it returns soon (Cancelled), so that a shutdown does not wait for the range's timeout.
  virtual absl::StatusOr<PromSeries> QueryRange(const std::string& /*promql*/, absl::Time /*start*/,
                                                absl::Duration /*step*/, int64_t /*count*/,
                                                const std::atomic<bool>* /*cancel*/) {
    return absl::UnimplementedError("the metric source keeps no history");
  }
};

class PromSource final : public MetricSource {
 public:
  explicit PromSource(PromConfig c) : client_(std::move(c)) {}
  absl::StatusOr<PromValue> Query(const std::string& promql, absl::Time at) override {
    return client_.Query(promql, at);
  }
  absl::StatusOr<PromSeries> QueryRange(const std::string& promql, absl::Time start,
                                        absl::Duration step, int64_t count,
                                        const std::atomic<bool>* cancel) override {
    return client_.QueryRange(promql, start, step, count, cancel);
  }
  const PromClient& client() const { return client_; }

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

  // Queries every service's signals as Prometheus held them at `at` and decides as of `at`,
  // config().poll_concurrency services at once. ServeScaler polls at PollInstant()s: every
  // replica polling the same Prometheus asks for the same instants, and so decides alike.
  void PollAt(absl::Time at);
  void PollOnce() { PollAt(clock_.Now()); }  // as of the clock's now
  // The instant a poll at `now` decides for: the last multiple of the poll interval since the
  // Unix epoch, less prometheus.queryOffset.
  absl::Time PollInstant(absl::Time now) const;
  // Rebuilds what the policy learns from each service's past (the seasonal rule's per-minute
  // load, the batch per replica, and the scale-down window, idle clock and demand trend a restart
  // would otherwise reset) from Prometheus' range queries over autoscale::HistoryToRebuild before
  // now: the service's signals at every BackfillStep(), replayed through DecideReplicas into a
  // state of their own (what this process would have recorded, had it run then), merged into the
  // live state with autoscale::MergeHistory. Polls may run meanwhile. Logs a line per service; a
  // failed query leaves that service's state as it was. Returns within about a second once *stop is
  // set (the range query in flight is cancelled, and the services not yet rebuilt log nothing).
  void Backfill(const std::atomic<bool>* stop = nullptr);
  // The same for what config reloads left to rebuild since the last call (see Reload): a service
  // added, as Backfill does; a changed service whose seasonal rule now reads further back
  // (autoscale::SeasonalReach: seasonalPeriods x seasonalRepeats; the policy keeps the minutes it
  // had, and the rule reaches before them), its per-minute load replayed under the new knobs and
  // merged with autoscale::MergeLoadHistory (what it learned while serving, its load, window and
  // batch, stays). Nothing when nothing is left.
  void BackfillReloaded(const std::atomic<bool>* stop = nullptr);
  // NotFound for an unknown service.
  absl::StatusOr<ScalerView> View(const std::string& service) const;
  // Prometheus' text exposition (version 0.0.4) of what the scaler decided and saw, per
  // service, and of the RPCs it answered: for dashboards of decision against actual replicas and
  // alerts on missing data (docs/autoscaling.md lists the metrics).
  std::string MetricsText() const;
  // What an operator asks first, in plain text (GET /status on --metrics-listen): for each
  // service its decision, whether GetMetrics answers it (fresh) or KEDA's fallback applies, why
  // (the policy's reason, with the queries that failed), the signals it rests on, and its polls,
  // failures and load history; and whether the config file's text is what runs.
  std::string StatusText() const;
  // Counts an answered RPC by method and gRPC status code name (e.g. "GetMetrics", "OK").
  void CountRpc(const std::string& method, const std::string& code);
  // One line to the log sink (if any), between whole poll reports: for what ServeScaler sees,
  // such as renewed TLS files.
  void Log(const std::string& line);
  // The TLS files whose expiry and reloads MetricsText shows (ServeScaler sets them when it
  // serves TLS).
  void ShowTls(std::shared_ptr<const TlsFiles> files);
  // Takes a new config while serving: its services' queries and knobs apply from the next poll
  // (a poll in flight finishes on the old ones), what a kept service learned is kept, a service
  // added is polled from the next poll, one removed is answered NotFound. With `backfill` on, a
  // service added and one whose seasonal rule the change made read further back are left for
  // BackfillReloaded (without it, that history builds up from the next poll). FailedPrecondition,
  // and nothing taken, when anything outside `services` differs: the Prometheus client, TLS, poll
  // loop and backfill were built from it at start (restart to apply). Returns what changed
  // ("chat-small changed; chat-large added; old removed", an added service followed by ", its
  // history to be rebuilt" and one whose rule reads further back by ", its load history kept,
  // further back to be rebuilt" or, without backfill, ", its load history kept, further back fills
  // from now"), "" when nothing did.
  absl::StatusOr<std::string> Reload(ScalerConfig next);
  // Counts a changed config file read while serving, by outcome ("applied", "invalid",
  // "needs_restart"), and whether what the file holds now is what runs (tessera_scaler_config_*).
  void CountConfigReload(const std::string& result, bool current);
  // The config running now (a snapshot: a reload replaces it, it does not change).
  std::shared_ptr<const ScalerConfig> config() const;
  const Clock& clock() const { return clock_; }
  static std::string MetricName(const std::string& service) { return "tessera-" + service; }

 private:
  // What the scaler shows of a service (View, MetricsText): copied out to be formatted, without
  // the policy's state (whose load history is up to a month of minutes).
  struct Shown {
    ScalerView view;
    autoscale::Signals last;         // the signals of the last poll (absent ones not present)
    int64_t polls = 0;               // 0: not polled yet
    int64_t polls_without_data = 0;  // decided without fresh data (held)
    int64_t query_failures = 0;      // a query failed or found no series where one is needed
    int64_t history_minutes = 0;     // load history the policy's state holds (set when copied)
    // Its history is to be rebuilt from Prometheus: at start, after a reload that added it,
    // changed its queries or lengthened its seasonal reach, and while a failed rebuild is tried
    // again. False once rebuilt, given up, or with backfill off.
    bool rebuild_due = false;
  };
  struct Service {
    autoscale::AutoscaleState state;
    Shown shown;
    // While its history is to be rebuilt (backfill on, from the start or from a reload that added
    // it): each poll's instant and signals, replayed onto the rebuilt history, so that the state
    // becomes the one a scaler that had run all along holds. nullopt once rebuilt, or when given
    // up past kMaxPending polls (the history is then merged as autoscale::MergeHistory can).
    std::optional<std::vector<std::pair<absl::Time, autoscale::Signals>>> pending;
  };
  static constexpr size_t kMaxPending = 10000;
  // What a rebuild from Prometheus merges into a service's state: all that
  // autoscale::MergeHistory carries (at start, a service added), or only the per-minute load
  // (autoscale::MergeLoadHistory: a service whose knobs reshaped it while it served).
  enum class Rebuild { kLoadOnly, kWhole };
  // A rebuild to come (BackfillReloaded takes those due): what, not before when, and for one
  // tried again after failing, how often and since when it failed, and the reason last logged.
  struct Due {
    Rebuild what = Rebuild::kWhole;
    absl::Time not_before = absl::InfinitePast();
    int failures = 0;
    absl::Time first_failed = absl::InfinitePast();
    std::string logged;
  };
  // A failed try waits this long, doubled after each further failure, up to kRetryCap.
  static constexpr absl::Duration kFirstRetry = absl::Seconds(10);
  static constexpr absl::Duration kRetryCap = absl::Minutes(5);
  // What MetricsText and StatusText show, copied under the lock so that formatting holds none.
  struct Snapshot {
    std::shared_ptr<const ScalerConfig> config;  // the one `services` belongs to
    std::map<std::string, Shown> services;
    std::map<std::pair<std::string, std::string>, int64_t> rpcs;
    std::shared_ptr<const TlsFiles> tls;
    std::map<std::string, int64_t> reloads;
    bool current = true;
  };
  Snapshot TakeSnapshot() const;
  // One service's queries and decision; its log line if the decision changed, else "".
  std::string PollService(const ServiceConfig& cfg, absl::Time at);
  // One service's backfill; its log line ("" when stopped).
  std::string BackfillService(const ServiceConfig& cfg, absl::Duration step,
                              const std::atomic<bool>* stop, const Due& due);
  // After a failed rebuild of `svc`: queues it again after a backoff, keeping its polls to replay
  // (or gives up once it has failed for as long as the history it would bring, which the polls
  // since then hold). Its log line ("" when this failure is not logged).
  std::string RetryRebuild(const ServiceConfig& cfg, Service& svc, const Due& due,
                           absl::string_view why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `fn` for every service, config().poll_concurrency at once, then logs the lines it
  // returned (in config order, whichever thread ran them; "" logs nothing). The log sink is
  // called under log_mu_: polls and the backfill log from their own threads.
  void ForEachService(const std::function<std::string(const ServiceConfig&)>& fn);
  // A service (added by a reload, or whose queries it changed) with nothing learned yet: with
  // backfill, its polls kept from now and its history's rebuild queued, to replay them onto.
  Service& LearnAfresh(const std::string& name, bool backfill) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The service `cfg` (a config snapshot's entry) polled or rebuilt for, unless a reload has
  // since removed it or changed its queries: what was read from other series is not its own.
  Service* Current(const ServiceConfig& cfg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A decision GetMetrics may answer: made on fresh data, and not older than staleAfter.
  static bool FreshAt(const ScalerView& v, const ServiceConfig& cfg, absl::Time now);
  // Counts into *failures a query that gives no sample.
  autoscale::Sample Read(const std::string& query, bool empty_is_zero, absl::Time at,
                         std::string* problems, int64_t* failures);

  MetricSource& source_;
  const Clock& clock_;
  LogSink log_;
  Mutex log_mu_;
  mutable Mutex mu_;
  std::shared_ptr<const ScalerConfig> config_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Service> services_ ABSL_GUARDED_BY(mu_);
  // Left by Reload, and by failed rebuilds to try again, for BackfillReloaded.
  std::map<std::string, Due> to_rebuild_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> config_reloads_ ABSL_GUARDED_BY(mu_);  // by outcome
  bool config_current_ ABSL_GUARDED_BY(mu_) = true;
  std::map<std::pair<std::string, std::string>, int64_t> rpcs_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const TlsFiles> tls_ ABSL_GUARDED_BY(mu_);  // none: plaintext
};

// The config file a serving scaler reads again, the text it runs, and how often (in time slept:
// a ConfigMap's mounted file changes within about a minute of the ConfigMap, and reading a small
// file is cheap).
struct ConfigWatch {
  std::string path;
  std::string text;
  absl::Duration interval = absl::Seconds(10);
};

// Reads watch->path again; when its text differs from watch->text, decodes it and hands it to
// scaler.Reload, then logs and counts the outcome (applied, invalid: the error located in the
// file, needs_restart). watch->text becomes the text read, so one edit is reported once.
void CheckConfigFile(Scaler& scaler, ConfigWatch* watch);

// Serves `scaler` on `listen` (host:port; port 0 = any, reported in *bound_port) until *stop,
// polling every config()->poll_interval. TLS when the config names a certificate and key. With
// `watch`, its file is read again every watch->interval of time slept (CheckConfigFile).
absl::Status ServeScaler(Scaler& scaler, const std::string& listen, const std::atomic<bool>* stop,
                         std::atomic<int>* bound_port = nullptr, ConfigWatch* watch = nullptr);

}  // namespace tessera::adapters
