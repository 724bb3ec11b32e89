#include "adapters/keda/scaler.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "adapters/io/files.h"
#include "adapters/keda/server_tls.h"
#include "base/parallel.h"
#include "externalscaler.grpc.pb.h"

namespace tessera::adapters {

Scaler::Scaler(ScalerConfig config, MetricSource& source, const Clock& clock, LogSink log)
    : source_(source), clock_(clock), log_(std::move(log)) {
  MutexLock lock(&mu_);
  config_ = std::make_shared<const ScalerConfig>(std::move(config));
  for (const ServiceConfig& s : config_->services) {
    Service& svc = services_[s.name];
    svc.shown.view.reason = "no poll yet";
    if (config_->backfill) svc.pending.emplace();
    svc.shown.rebuild_due = config_->backfill;
  }
}

std::shared_ptr<const ScalerConfig> Scaler::config() const {
  MutexLock lock(&mu_);
  return config_;
}

absl::StatusOr<std::string> Scaler::Reload(ScalerConfig next) {
  auto fresh = std::make_shared<const ScalerConfig>(std::move(next));
  MutexLock lock(&mu_);
  if (fresh->server_settings != config_->server_settings) {
    return absl::FailedPreconditionError(
        "a setting outside `services` changed (prometheus, tls): restart the scaler to apply "
        "it; nothing of this config was taken");
  }
  std::vector<std::string> changes;
  for (const ServiceConfig& s : fresh->services) {
    const ServiceConfig* was = config_->Find(s.name);
    if (was == nullptr) {
      LearnAfresh(s.name, fresh->backfill).shown.view.reason =
          "no poll yet (added by a config reload)";
      changes.push_back(absl::StrCat(s.name, " added"));
      if (fresh->backfill) absl::StrAppend(&changes.back(), ", its history to be rebuilt");
    } else if (!was->SameQueries(s)) {
      // What it learned (load history, batch, scale-down window, idle clock) came from other
      // series: it starts afresh, as a scaler started with this config does (holding the
      // replicas it finds for one scale-down window).
      LearnAfresh(s.name, fresh->backfill);
      changes.push_back(absl::StrCat(s.name, " changed its queries: what it learned is dropped"));
      if (fresh->backfill) {
        absl::StrAppend(&changes.back(), ", its history to be rebuilt from the new queries");
      } else {
        absl::StrAppend(&changes.back(), ", it learns from now");
      }
    } else if (was->settings != s.settings) {
      changes.push_back(absl::StrCat(s.name, " changed"));
      // The next decision moves the seasonal rule's history into a ring of the new span; a rule
      // that reads further back reaches minutes before what the service kept.
      if (autoscale::SeasonalReach(s.policy) > autoscale::SeasonalReach(was->policy)) {
        if (fresh->backfill) {
          // One pending (added, or tried again) stays as it is: whole covers this.
          Due load_only;
          load_only.what = Rebuild::kLoadOnly;
          to_rebuild_.emplace(s.name, load_only);
          services_[s.name].shown.rebuild_due = true;
          absl::StrAppend(&changes.back(), ", its load history kept, further back to be rebuilt");
        } else {
          absl::StrAppend(&changes.back(), ", its load history kept, further back fills from now");
        }
      }
    }
  }
  for (const ServiceConfig& s : config_->services) {
    if (fresh->Find(s.name) == nullptr) {
      services_.erase(s.name);
      to_rebuild_.erase(s.name);
      changes.push_back(absl::StrCat(s.name, " removed"));
    }
  }
  config_ = std::move(fresh);
  return absl::StrJoin(changes, "; ");
}

Scaler::Service& Scaler::LearnAfresh(const std::string& name, bool backfill) {
  Service& svc = services_[name];
  svc.state = autoscale::AutoscaleState();
  svc.pending.reset();
  svc.shown.rebuild_due = backfill;
  if (backfill) {
    svc.pending.emplace();
    to_rebuild_[name] = Due{};  // at once, whole, the failures of one queued before forgotten
  }
  return svc;
}

void Scaler::CountConfigReload(const std::string& result, bool current) {
  MutexLock lock(&mu_);
  ++config_reloads_[result];
  config_current_ = current;
}

autoscale::Sample Scaler::Read(const std::string& query, bool empty_is_zero, absl::Time at,
                               std::string* problems, int64_t* failures) {
  absl::StatusOr<PromValue> v = source_.Query(query, at);
  if (!v.ok() || (v->empty && !empty_is_zero)) ++*failures;
  if (!v.ok()) {
    // Once per distinct problem (an unreachable Prometheus fails every query alike).
    if (!absl::StrContains(*problems, v.status().message())) {
      absl::StrAppend(problems, problems->empty() ? "" : "; ", v.status().message());
    }
    return {};
  }
  if (v->empty) {
    if (empty_is_zero) return autoscale::Sample::At(0, at);
    absl::StrAppend(problems, problems->empty() ? "" : "; ", "no series for ", query);
    return {};
  }
  // Prometheus stamps an instant query with its evaluation time, the one asked for; a stamp
  // after it counts as that time.
  return autoscale::Sample::At(v->value,
                               v->sampled == absl::InfinitePast() ? at : std::min(v->sampled, at));
}

void Scaler::ForEachService(const std::function<std::string(const ServiceConfig&)>& fn) {
  const std::shared_ptr<const ScalerConfig> config = this->config();  // a reload may replace it
  std::vector<std::string> lines(config->services.size());
  ParallelFor(lines.size(), static_cast<size_t>(config->poll_concurrency),
              [&](size_t i) { lines[i] = fn(config->services[i]); });
  if (log_) {
    MutexLock lock(&log_mu_);
    for (const std::string& line : lines) {
      if (!line.empty()) log_(line);
    }
  }
}

void Scaler::Log(const std::string& line) {
  if (!log_) return;
  MutexLock lock(&log_mu_);
  log_(line);
}

void Scaler::ShowTls(std::shared_ptr<const TlsFiles> files) {
  MutexLock lock(&mu_);
  tls_ = std::move(files);
}

void Scaler::PollAt(absl::Time at) {
  ForEachService([this, at](const ServiceConfig& cfg) { return PollService(cfg, at); });
}

namespace {

// The last multiple of `period` since the Unix epoch at or before `t`: the instants every replica
// polls and replays at.
absl::Time LastMultiple(absl::Time t, absl::Duration period) {
  return absl::UnixEpoch() + absl::Floor(t - absl::UnixEpoch(), period);
}

}  // namespace

absl::Time Scaler::PollInstant(absl::Time now) const {
  const std::shared_ptr<const ScalerConfig> c = config();
  return LastMultiple(now, c->poll_interval) - c->query_offset;
}

namespace {

// The service's signals as the policy takes them, each query answered by `read(query,
// empty_is_zero)` (a sample, or absent when it failed or found no series where one is needed):
// the same for a poll and for a replay of Prometheus' history.
template <typename Read>
autoscale::Signals ReadSignals(const ServiceConfig& cfg, absl::Time now, const Read& read) {
  autoscale::Signals s;
  s.ready = read(cfg.ready_query, /*empty_is_zero=*/false);
  // With no replica up, the servers' series are absent, which means nothing is queued there.
  const bool none_up = s.ready.present && s.ready.value == 0;
  // At zero the servers' queue is gone with them: the gateway's, where configured, stands in.
  s.waiting = none_up && !cfg.activation_query.empty()
                  ? read(cfg.activation_query, /*empty_is_zero=*/true)
                  : read(cfg.queue_query, none_up);
  s.running =
      cfg.running_query.empty() ? autoscale::Sample::At(0, now) : read(cfg.running_query, none_up);
  if (!cfg.utilization_query.empty()) {
    s.utilization = read(cfg.utilization_query, false);
    if (none_up) s.utilization = {};
  }
  if (!cfg.throughput_query.empty()) s.throughput = read(cfg.throughput_query, true);
  if (!cfg.starting_query.empty()) s.starting = read(cfg.starting_query, true);
  return s;
}

}  // namespace

std::string Scaler::PollService(const ServiceConfig& cfg, absl::Time at) {
  std::string problems;
  int64_t failures = 0;
  const autoscale::Signals s =
      ReadSignals(cfg, at, [&](const std::string& query, bool empty_is_zero) {
        return Read(query, empty_is_zero, at, &problems, &failures);
      });
  MutexLock lock(&mu_);
  Service* const current = Current(cfg);
  if (current == nullptr) return "";  // removed, or its queries changed, while they ran
  Service& svc = *current;
  if (svc.pending.has_value()) {
    if (svc.pending->size() < kMaxPending) {
      svc.pending->emplace_back(at, s);
    } else {
      svc.pending.reset();
    }
  }
  autoscale::Decision d = autoscale::DecideReplicas(cfg.policy, s, svc.state, at);
  const bool first = svc.shown.polls == 0;
  const bool changed =
      first || d.replicas != svc.shown.view.replicas || d.data_ok != svc.shown.view.data_ok;
  const int before = svc.shown.view.replicas;
  svc.shown.view.replicas = d.replicas;
  svc.shown.view.reason = problems.empty() ? d.reason : absl::StrCat(d.reason, " [", problems, "]");
  svc.shown.view.decided_at = at;
  svc.shown.view.data_ok = d.data_ok;
  svc.shown.last = s;
  ++svc.shown.polls;
  svc.shown.polls_without_data += d.data_ok ? 0 : 1;
  svc.shown.query_failures += failures;
  if (!changed) return "";
  return absl::StrCat(cfg.name, ": ", d.replicas, " replicas",
                      !first && before != d.replicas ? absl::StrCat(" (was ", before, ")") : "",
                      d.data_ok ? "" : ", data missing", ": ", svc.shown.view.reason);
}

void Scaler::Backfill(const std::atomic<bool>* stop) {
  // The step is a server setting, which a reload leaves as it is.
  const absl::Duration step = config()->BackfillStep();
  ForEachService([&](const ServiceConfig& cfg) { return BackfillService(cfg, step, stop, Due{}); });
}

void Scaler::BackfillReloaded(const std::atomic<bool>* stop) {
  std::map<std::string, Due> todo;  // those due now; the others wait for their time
  {
    MutexLock lock(&mu_);
    const absl::Time now = clock_.Now();
    for (auto it = to_rebuild_.begin(); it != to_rebuild_.end();) {
      if (it->second.not_before <= now) {
        todo.insert(to_rebuild_.extract(it++));
      } else {
        ++it;
      }
    }
  }
  if (todo.empty()) return;
  const absl::Duration step = config()->BackfillStep();
  ForEachService([&](const ServiceConfig& cfg) {
    auto what = todo.find(cfg.name);  // the others have nothing to rebuild
    return what == todo.end() ? std::string() : BackfillService(cfg, step, stop, what->second);
  });
}

std::string Scaler::RetryRebuild(const ServiceConfig& cfg, Service& svc, const Due& due,
                                 absl::string_view why) {
  const absl::Time now = clock_.Now();
  Due next = due;
  if (++next.failures == 1) next.first_failed = now;
  if (now - next.first_failed >= autoscale::HistoryToRebuild(cfg.policy)) {
    svc.pending.reset();
    svc.shown.rebuild_due = false;
    return absl::StrCat(
        cfg.name, ": history not rebuilt (", why, "); failing for ",
        absl::FormatDuration(absl::Trunc(now - next.first_failed, absl::Minutes(1))),
        ", as long as the history it would bring, which its polls since hold: not "
        "tried again");
  }
  absl::Duration wait = kFirstRetry;
  for (int i = 1; i < next.failures && wait < kRetryCap; ++i) wait *= 2;
  wait = std::min(wait, kRetryCap);
  next.not_before = now + wait;
  // Logged when the reason changes, else at the 1st, 2nd, 4th, 8th... failure.
  const bool log = why != due.logged || (next.failures & (next.failures - 1)) == 0;
  next.logged = std::string(why);
  // A reload that asked for a rebuild meanwhile keeps its own (at once); whole if either is.
  auto [queued, fresh] = to_rebuild_.emplace(cfg.name, next);
  if (!fresh && next.what == Rebuild::kWhole) queued->second.what = Rebuild::kWhole;
  if (!log) return "";
  return absl::StrFormat(
      "%s: history not rebuilt (%s); tried again in %s (failed %d time%s), meanwhile it builds "
      "up from its polls",
      cfg.name, why, absl::FormatDuration(wait), next.failures, next.failures == 1 ? "" : "s");
}

std::string Scaler::BackfillService(const ServiceConfig& cfg, absl::Duration step,
                                    const std::atomic<bool>* stop, const Due& due) {
  const Rebuild what = due.what;
  // Steps up to the one before now, at the instants the live polls decide for (when the step is
  // the poll interval): the live polls take it from there, and a replica started later replays
  // what one running since saw.
  const int64_t count = autoscale::HistoryToRebuild(cfg.policy) / step;
  const absl::Time start = LastMultiple(clock_.Now(), step) - config()->query_offset - count * step;
  auto stopped = [stop] { return stop != nullptr && stop->load(); };
  // When a reload removed the service meanwhile: nothing to say. When it changed the queries: the
  // rebuild it asked for reads the new ones.
  auto superseded = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return services_.count(cfg.name) == 0
               ? std::string()
               : absl::StrCat(cfg.name, ": history from the queries before the reload let go");
  };
  auto failed = [&](absl::string_view why) {
    MutexLock lock(&mu_);
    Service* const svc = Current(cfg);
    if (svc == nullptr) return superseded();
    return RetryRebuild(cfg, *svc, due, why);
  };
  // A chunk of steps at a time, each query's answer replayed and let go (a month at 5 s
  // steps would otherwise hold millions of points per query).
  autoscale::AutoscaleState past;
  int64_t with_data = 0;
  absl::Time first = absl::InfiniteFuture();
  absl::Time last = absl::InfinitePast();  // the last step replayed
  for (int64_t done = 0; done < count;) {
    const int64_t n = std::min(count - done, PromClient::kMaxRangePoints);
    std::map<std::string, PromSeries> series;
    for (const auto& [name, query] : cfg.DistinctQueries()) {
      if (stopped()) return "";
      absl::StatusOr<PromSeries> got =
          source_.QueryRange(*query, start + done * step, step, n, stop);
      if (!got.ok()) {  // a query the shutdown cancelled is not Prometheus failing
        return stopped() ? "" : failed(absl::StrCat(*query, ": ", got.status().message()));
      }
      if (static_cast<int64_t>(got->points.size()) != n) {
        return failed(absl::StrCat(*query, ": ", got->points.size(), " steps for ", n));
      }
      series.emplace(*query, *std::move(got));
    }
    // At the times Prometheus answered for (kept to its milliseconds).
    const PromSeries& any = series.begin()->second;
    first = std::min(first, any.start);
    for (int64_t k = 0; k < n; ++k) {
      const absl::Time t = any.start + k * any.step;
      const autoscale::Signals s =
          ReadSignals(cfg, t, [&](const std::string& query, bool empty_is_zero) {
            const std::optional<double>& p = series.at(query).points[static_cast<size_t>(k)];
            if (!p.has_value()) {
              return empty_is_zero ? autoscale::Sample::At(0, t) : autoscale::Sample{};
            }
            if (!std::isfinite(*p)) return autoscale::Sample{};  // as the instant query fails
            return autoscale::Sample::At(*p, t);
          });
      with_data += autoscale::DecideReplicas(cfg.policy, s, past, t).data_ok ? 1 : 0;
      last = t;
    }
    done += n;
  }
  const double batch = past.batch_per_replica;  // what the history showed, for the log
  bool carried = false;
  {
    MutexLock lock(&mu_);
    Service* const current = Current(cfg);
    if (current == nullptr) return superseded();
    Service& svc = *current;
    if (what == Rebuild::kWhole) {
      // The polls since the start (or the reload) replayed onto a history that reaches the first
      // of them: the state of a scaler that had run all along, which another replica polling
      // since holds too. Otherwise (none yet, some given up, or a history that ends earlier)
      // merged.
      if (svc.pending.has_value() && !svc.pending->empty() &&
          past.last_fresh >= svc.pending->front().first - cfg.policy.stale_after) {
        for (const auto& [at, signals] : *svc.pending) {
          if (at > last) autoscale::DecideReplicas(cfg.policy, signals, past, at);
        }
        svc.state = std::move(past);
        carried = true;
      } else {
        carried = autoscale::MergeHistory(cfg.policy, past, svc.state);
      }
    } else {
      autoscale::MergeLoadHistory(cfg.policy, past, svc.state);
    }
    svc.pending.reset();
    svc.shown.rebuild_due = false;
  }
  std::string rebuilt = absl::StrFormat(
      "%s: %s rebuilt from Prometheus: %s from %s at %s steps, %.1f%% of them with the service's "
      "signals",
      cfg.name, what == Rebuild::kWhole ? "history" : "load history (further back)",
      absl::FormatDuration(count * step),
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", first, absl::UTCTimeZone()),
      absl::FormatDuration(step), count > 0 ? 100.0 * with_data / count : 0.0);
  if (due.failures > 0) {
    absl::StrAppend(&rebuilt, " (after ", due.failures, " failed tr",
                    due.failures == 1 ? "y" : "ies", ")");
  }
  if (what == Rebuild::kLoadOnly) return rebuilt;
  return absl::StrFormat(
      "%s; batch %s; scale-down window, idle clock and demand trend %s", rebuilt,
      batch > 0 ? absl::StrFormat("%.0f requests per replica", batch)
                : std::string("not seen (no request waited while replicas ran)"),
      carried ? "carried over" : "start afresh (no signals within staleAfter before the start)");
}

void Scaler::CountRpc(const std::string& method, const std::string& code) {
  MutexLock lock(&mu_);
  ++rpcs_[{method, code}];
}

namespace {

// A label value in the text exposition format: backslash, double quote and newline escaped.
std::string LabelValue(absl::string_view v) {
  std::string out;
  for (char ch : v) {
    if (ch == '\\') {
      out += "\\\\";
    } else if (ch == '"') {
      out += "\\\"";
    } else if (ch == '\n') {
      out += "\\n";
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace

Scaler::Service* Scaler::Current(const ServiceConfig& cfg) {
  auto found = services_.find(cfg.name);
  const ServiceConfig* now = config_->Find(cfg.name);
  if (found == services_.end() || now == nullptr || !now->SameQueries(cfg)) return nullptr;
  return &found->second;
}

bool Scaler::FreshAt(const ScalerView& v, const ServiceConfig& cfg, absl::Time now) {
  return v.data_ok && now - v.decided_at <= cfg.policy.stale_after;
}

Scaler::Snapshot Scaler::TakeSnapshot() const {
  Snapshot out;
  MutexLock lock(&mu_);
  out.config = config_;
  out.reloads = config_reloads_;
  out.current = config_current_;
  for (const auto& [name, svc] : services_) {
    Shown& s = out.services.emplace(name, svc.shown).first->second;
    const autoscale::AutoscaleState& st = svc.state;
    s.history_minutes = st.load_by_minute.empty() ? 0 : st.last_minute - st.first_minute + 1;
  }
  out.rpcs = rpcs_;
  out.tls = tls_;
  return out;
}

namespace {

// The signals of a poll, as the metrics name them, each with its sample.
std::vector<std::pair<const char*, const autoscale::Sample*>> SignalsOf(
    const autoscale::Signals& s) {
  return {
      {"waiting", &s.waiting},   {"running", &s.running},         {"ready", &s.ready},
      {"starting", &s.starting}, {"utilization", &s.utilization}, {"throughput", &s.throughput}};
}

// A config reload outcome's count (0 before the first).
int64_t ReloadsOf(const std::map<std::string, int64_t>& reloads, const char* outcome) {
  auto it = reloads.find(outcome);
  return it == reloads.end() ? 0 : it->second;
}

// A time since, to the second ("0s", "42s", "1h2m3s").
std::string Ago(absl::Duration d) {
  d = absl::Trunc(d, absl::Seconds(1));
  return d <= absl::ZeroDuration() ? "0s" : absl::FormatDuration(d);
}

}  // namespace

std::string Scaler::StatusText() const {
  const Snapshot snap = TakeSnapshot();
  const absl::Time now = clock_.Now();
  std::string out = absl::StrFormat(
      "tessera scaler at %s: %d services; config: %s (reloads while serving: %d applied, %d "
      "invalid, %d needing a restart)\n",
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone()),
      snap.config->services.size(),
      snap.current ? "the file's text runs"
                   : "the file holds a change that was not taken (the log says why)",
      ReloadsOf(snap.reloads, "applied"), ReloadsOf(snap.reloads, "invalid"),
      ReloadsOf(snap.reloads, "needs_restart"));
  for (const ServiceConfig& cfg : snap.config->services) {
    const Shown& svc = snap.services.at(cfg.name);
    if (svc.polls == 0) {
      absl::StrAppend(&out, cfg.name, ": ", svc.view.reason, "\n");
      continue;
    }
    const bool fresh = FreshAt(svc.view, cfg, now);
    absl::StrAppend(&out, cfg.name, ": ", svc.view.replicas, " replicas, ",
                    fresh ? "fresh (GetMetrics answers it)"
                          : "held on missing or stale data (GetMetrics answers UNAVAILABLE: KEDA's "
                            "fallback applies)",
                    ", decided ", Ago(now - svc.view.decided_at), " ago (minReplicas ",
                    cfg.policy.min_replicas, ", maxReplicas ", cfg.policy.max_replicas,
                    ")\n  why: ", svc.view.reason, "\n  signals:");
    bool any = false;
    for (const auto& [signal, sample] : SignalsOf(svc.last)) {
      if (!sample->present) continue;
      absl::StrAppend(&out, any ? ", " : " ", signal, " ", absl::StrFormat("%.4g", sample->value));
      any = true;
    }
    absl::StrAppend(
        &out, any ? "" : " none read",
        absl::StrFormat("\n  polls %d, %d of them without fresh data, %d query "
                        "failures; load history %d minutes%s\n",
                        svc.polls, svc.polls_without_data, svc.query_failures, svc.history_minutes,
                        svc.rebuild_due ? " (to be rebuilt from Prometheus)" : ""));
  }
  return out;
}

std::string Scaler::MetricsText() const {
  std::string out;
  auto family = [&out](const char* name, const char* type, const char* help) {
    absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  };
  const Snapshot snap = TakeSnapshot();
  const std::shared_ptr<const ScalerConfig>& config = snap.config;
  const std::map<std::string, Shown>& services = snap.services;
  const absl::Time now = clock_.Now();
  // One family at a time, a sample per service (the format wants a family's samples together).
  auto per_service = [&](const char* name, const char* type, const char* help, auto value) {
    family(name, type, help);
    for (const ServiceConfig& cfg : config->services) {
      const Shown& svc = services.at(cfg.name);
      if (svc.polls == 0) continue;
      absl::StrAppend(&out, name, "{service=\"", LabelValue(cfg.name), "\"} ", value(cfg, svc),
                      "\n");
    }
  };
  per_service("tessera_scaler_desired_replicas", "gauge",
              "The replica count served to KEDA (the last decision).",
              [](const ServiceConfig&, const Shown& s) { return s.view.replicas; });
  per_service("tessera_scaler_min_replicas", "gauge", "The service's minReplicas (its floor).",
              [](const ServiceConfig& c, const Shown&) { return c.policy.min_replicas; });
  per_service("tessera_scaler_max_replicas", "gauge",
              "The service's maxReplicas: a decision held here means demand is capped.",
              [](const ServiceConfig& c, const Shown&) { return c.policy.max_replicas; });
  per_service(
      "tessera_scaler_fresh", "gauge",
      "1 when the decision rests on fresh data (GetMetrics answers it), 0 when held on "
      "missing or stale data (GetMetrics is UNAVAILABLE, KEDA's fallback applies).",
      [&](const ServiceConfig& cfg, const Shown& s) { return FreshAt(s.view, cfg, now) ? 1 : 0; });
  per_service("tessera_scaler_last_poll_timestamp_seconds", "gauge",
              "The instant the service's last poll decided for (Unix time): the poll's "
              "multiple of pollInterval, less queryOffset.",
              [](const ServiceConfig&, const Shown& s) {
                return absl::StrFormat("%.3f", absl::ToUnixMillis(s.view.decided_at) / 1e3);
              });
  per_service("tessera_scaler_load_history_minutes", "gauge",
              "Minutes of load history the recurring-load rule holds (from the live polls and, "
              "after a start, rebuilt from Prometheus); it acts once it holds seasonalRepeats "
              "periods.",
              [](const ServiceConfig&, const Shown& s) { return s.history_minutes; });
  per_service("tessera_scaler_history_rebuild_due", "gauge",
              "1 while the service's history is to be rebuilt from Prometheus (at start, after a "
              "reload that added it, changed its queries or lengthened its seasonal reach, and "
              "while a failed rebuild is tried again); 0 once rebuilt or given up, or with "
              "backfill off.",
              [](const ServiceConfig&, const Shown& s) { return s.rebuild_due ? 1 : 0; });
  per_service("tessera_scaler_polls_total", "counter", "Polls of the service's queries.",
              [](const ServiceConfig&, const Shown& s) { return s.polls; });
  per_service("tessera_scaler_polls_without_data_total", "counter",
              "Polls whose decision was held for lack of fresh data.",
              [](const ServiceConfig&, const Shown& s) { return s.polls_without_data; });
  per_service("tessera_scaler_query_failures_total", "counter",
              "Queries that failed (unreachable, timeout, HTTP or PromQL error, NaN) or found "
              "no series where one is needed.",
              [](const ServiceConfig&, const Shown& s) { return s.query_failures; });
  family("tessera_scaler_signal", "gauge",
         "The signals of the last poll, as the policy read them (absent when not read or "
         "missing).");
  for (const ServiceConfig& cfg : config->services) {
    const Shown& svc = services.at(cfg.name);
    for (const auto& [signal, sample] : SignalsOf(svc.last)) {
      if (svc.polls == 0 || !sample->present) continue;
      absl::StrAppend(&out, "tessera_scaler_signal{service=\"", LabelValue(cfg.name),
                      "\",signal=\"", signal, "\"} ", absl::StrFormat("%.10g", sample->value),
                      "\n");
    }
  }
  family("tessera_scaler_grpc_requests_total", "counter",
         "KEDA's calls answered, by method and gRPC status code.");
  for (const auto& [key, n] : snap.rpcs) {
    absl::StrAppend(&out, "tessera_scaler_grpc_requests_total{method=\"", key.first, "\",code=\"",
                    key.second, "\"} ", n, "\n");
  }
  family("tessera_scaler_config_current", "gauge",
         "1 when the config file holds what the scaler runs; 0 when its last change was not "
         "taken (invalid, or outside `services`: restart to apply).");
  absl::StrAppend(&out, "tessera_scaler_config_current ", snap.current ? 1 : 0, "\n");
  family("tessera_scaler_config_reloads_total", "counter",
         "Changes of the config file read while serving, by outcome (applied, invalid, "
         "needs_restart).");
  for (const char* result : {"applied", "invalid", "needs_restart"}) {
    absl::StrAppend(&out, "tessera_scaler_config_reloads_total{outcome=\"", result, "\"} ",
                    ReloadsOf(snap.reloads, result), "\n");
  }
  AppendTlsMetrics(&out, "tessera_scaler", snap.tls.get(), "the scaler serves to KEDA",
                   "read every tls.reloadInterval");
  return out;
}

absl::StatusOr<ScalerView> Scaler::View(const std::string& service) const {
  const absl::Time now = clock_.Now();
  MutexLock lock(&mu_);  // the config and the services together: a reload replaces both
  const ServiceConfig* cfg = config_->Find(service);
  if (cfg == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("service \"", service,
                     "\" is not in the scaler's config (known: ", config_->ServiceNames(), ")"));
  }
  ScalerView v = services_.at(service).shown.view;
  v.fresh = FreshAt(v, *cfg, now);
  return v;
}

namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case absl::StatusCode::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case absl::StatusCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    default:
      break;
  }
  return grpc::Status(code, std::string(s.message()));
}

class ExternalScalerImpl final : public externalscaler::ExternalScaler::Service {
 public:
  ExternalScalerImpl(Scaler& scaler, const std::atomic<bool>* stop)
      : scaler_(scaler), stop_(stop) {}

  // Each call counted by method and the code it was answered with (tessera_scaler_grpc_...).
  grpc::Status IsActive(grpc::ServerContext* ctx, const externalscaler::ScaledObjectRef* ref,
                        externalscaler::IsActiveResponse* out) override {
    return Count("IsActive", IsActiveImpl(ctx, ref, out));
  }
  grpc::Status StreamIsActive(
      grpc::ServerContext* ctx, const externalscaler::ScaledObjectRef* ref,
      grpc::ServerWriter<externalscaler::IsActiveResponse>* writer) override {
    return Count("StreamIsActive", StreamIsActiveImpl(ctx, ref, writer));
  }
  grpc::Status GetMetricSpec(grpc::ServerContext* ctx, const externalscaler::ScaledObjectRef* ref,
                             externalscaler::GetMetricSpecResponse* out) override {
    return Count("GetMetricSpec", GetMetricSpecImpl(ctx, ref, out));
  }
  grpc::Status GetMetrics(grpc::ServerContext* ctx, const externalscaler::GetMetricsRequest* req,
                          externalscaler::GetMetricsResponse* out) override {
    return Count("GetMetrics", GetMetricsImpl(ctx, req, out));
  }

 private:
  grpc::Status IsActiveImpl(grpc::ServerContext*, const externalscaler::ScaledObjectRef* ref,
                            externalscaler::IsActiveResponse* out) {
    absl::StatusOr<bool> active = Active(*ref);
    if (!active.ok()) return ToGrpc(active.status());
    out->set_result(*active);
    return grpc::Status::OK;
  }

  grpc::Status StreamIsActiveImpl(grpc::ServerContext* ctx,
                                  const externalscaler::ScaledObjectRef* ref,
                                  grpc::ServerWriter<externalscaler::IsActiveResponse>* writer) {
    const absl::Duration period = scaler_.config()->poll_interval;
    while (!ctx->IsCancelled() && !stop_->load()) {
      absl::StatusOr<bool> active = Active(*ref);
      if (!active.ok()) return ToGrpc(active.status());
      externalscaler::IsActiveResponse r;
      r.set_result(*active);
      if (!writer->Write(r)) break;
      for (absl::Duration slept; slept < period && !ctx->IsCancelled() && !stop_->load();
           slept += absl::Milliseconds(50)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status GetMetricSpecImpl(grpc::ServerContext*, const externalscaler::ScaledObjectRef* ref,
                                 externalscaler::GetMetricSpecResponse* out) {
    // Static: answered from the config alone, never from Prometheus (KEDA issue 8056).
    absl::StatusOr<std::string> service = ServiceOf(*ref);
    if (!service.ok()) return ToGrpc(service.status());
    externalscaler::MetricSpec* spec = out->add_metricspecs();
    spec->set_metricname(Scaler::MetricName(*service));
    spec->set_targetsize(1);
    spec->set_targetsizefloat(1.0);
    return grpc::Status::OK;
  }

  grpc::Status GetMetricsImpl(grpc::ServerContext*, const externalscaler::GetMetricsRequest* req,
                              externalscaler::GetMetricsResponse* out) {
    absl::StatusOr<std::string> service = ServiceOf(req->scaledobjectref());
    if (!service.ok()) return ToGrpc(service.status());
    absl::StatusOr<ScalerView> v = scaler_.View(*service);
    if (!v.ok()) return ToGrpc(v.status());
    if (!v->fresh) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("no fresh decision for ", *service, ": ", v->reason));
    }
    externalscaler::MetricValue* m = out->add_metricvalues();
    m->set_metricname(Scaler::MetricName(*service));
    m->set_metricvalue(v->replicas);
    m->set_metricvaluefloat(static_cast<double>(v->replicas));
    return grpc::Status::OK;
  }

  grpc::Status Count(const char* method, grpc::Status status) {
    // gRPC's codes are the canonical ones absl::StatusCode numbers alike.
    scaler_.CountRpc(method,
                     absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())));
    return status;
  }
  absl::StatusOr<std::string> ServiceOf(const externalscaler::ScaledObjectRef& ref) {
    auto it = ref.scalermetadata().find("service");
    if (it == ref.scalermetadata().end() || it->second.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ScaledObject ", ref.namespace_(), "/", ref.name(),
                       ": trigger metadata has no `service` key naming a service of the config"));
    }
    if (scaler_.config()->Find(it->second) == nullptr) {
      return scaler_.View(it->second).status();  // NotFound listing the known services
    }
    return it->second;
  }
  absl::StatusOr<bool> Active(const externalscaler::ScaledObjectRef& ref) {
    absl::StatusOr<std::string> service = ServiceOf(ref);
    if (!service.ok()) return service.status();
    absl::StatusOr<ScalerView> v = scaler_.View(*service);
    if (!v.ok()) return v.status();
    return !v->fresh || v->replicas > 0;  // unknown demand is never "inactive"
  }

  Scaler& scaler_;
  const std::atomic<bool>* stop_;
};

}  // namespace

void CheckConfigFile(Scaler& scaler, ConfigWatch* watch) {
  absl::StatusOr<std::string> text = ReadFile(watch->path);
  const std::string now = text.ok() ? *text : std::string();
  if (now == watch->text) return;
  watch->text = now;
  absl::StatusOr<ScalerConfig> next =
      text.ok() ? DecodeScalerConfig(watch->path, *text) : text.status();
  if (!next.ok()) {
    scaler.CountConfigReload("invalid", false);
    scaler.Log(absl::StrCat("config ", watch->path, " changed and is not taken (",
                            next.status().message(), "); serving the config read before"));
    return;
  }
  absl::StatusOr<std::string> changed = scaler.Reload(*std::move(next));
  if (!changed.ok()) {
    scaler.CountConfigReload("needs_restart", false);
    scaler.Log(absl::StrCat("config ", watch->path, " changed: ", changed.status().message()));
    return;
  }
  scaler.CountConfigReload("applied", true);
  scaler.Log(absl::StrCat("config ", watch->path,
                          " reloaded: ", changed->empty() ? "no service changed" : *changed));
}

absl::Status ServeScaler(Scaler& scaler, const std::string& listen, const std::atomic<bool>* stop,
                         std::atomic<int>* bound_port, ConfigWatch* watch) {
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  // The server settings, which a reload leaves as they are (Scaler::Reload).
  const std::shared_ptr<const ScalerConfig> config = scaler.config();
  const ScalerConfig& cfg = *config;
  std::unique_ptr<ServerTls> tls;  // outlives the server, whose handshakes it answers
  if (!cfg.tls_cert_file.empty()) {
    absl::StatusOr<std::unique_ptr<ServerTls>> made =
        ServerTls::Create(cfg.tls_cert_file, cfg.tls_key_file, cfg.tls_client_ca_file);
    if (!made.ok()) return made.status();
    tls = std::move(*made);
    creds = tls->credentials();
    scaler.ShowTls(tls->files());
  }
  ExternalScalerImpl service(scaler, stop);
  grpc::EnableDefaultHealthCheckService(true);  // for the kubelet's grpc probe
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, creds, &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  }
  if (bound_port != nullptr) bound_port->store(port);
  // The services' history, rebuilt while the polls go on (a month of range queries must
  // not keep the first decision waiting); then, until stopped, that of the services config
  // reloads add or reshape, each after the rebuilds before it.
  std::thread history;
  if (cfg.backfill) {
    history = std::thread([&scaler, stop] {
      scaler.Backfill(stop);
      while (!stop->load()) {
        scaler.BackfillReloaded(stop);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  // Poll every interval on the scaler's clock, at its multiples since the Unix epoch (each poll
  // for its PollInstant, so that replicas decide for the same instants); the first poll at once.
  // - Polls missed (a poll slower than the interval, the wall clock stepped forward) are
  //   skipped, not made up: one after a step of an hour, not 720 back to back, each querying
  //   Prometheus for every service.
  // - A wall clock stepped back stands still (RealClock never goes back) until it has caught
  //   up; meanwhile a poll comes every two intervals of time slept, so demand is still followed
  //   (the policy's windows, on the clock, do not pass: nothing scales down until then).
  const Clock& clock = scaler.clock();
  const absl::Duration tick = absl::Milliseconds(20);
  absl::Time next = clock.Now();
  absl::Duration slept;  // since the last poll
  // The TLS files are read again every reload interval of time slept (whatever the clock does),
  // and so is the config file every watch->interval.
  absl::Duration since_tls_reload;
  absl::Duration since_config_check;
  while (!stop->load()) {
    if (watch != nullptr && since_config_check >= watch->interval) {
      CheckConfigFile(scaler, watch);
      since_config_check = absl::ZeroDuration();
    }
    if (tls != nullptr && since_tls_reload >= cfg.tls_reload_interval) {
      ServerTls::Reloaded r = tls->Reload();
      if (r.outcome != ServerTls::Outcome::kSame) scaler.Log(r.message);
      since_tls_reload = absl::ZeroDuration();
    }
    if (clock.Now() >= next || slept >= 2 * cfg.poll_interval) {
      const absl::Time now = clock.Now();
      scaler.PollAt(scaler.PollInstant(now));
      next = LastMultiple(now, cfg.poll_interval) + cfg.poll_interval;
      slept = absl::ZeroDuration();
    }
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(tick));
    slept += tick;
    since_tls_reload += tick;
    since_config_check += tick;
  }
  server->Shutdown(absl::ToChronoTime(clock.Now() + absl::Seconds(2)));
  server->Wait();
  if (history.joinable()) history.join();  // its range query in flight stops within a second
  return absl::OkStatus();
}

}  // namespace tessera::adapters
