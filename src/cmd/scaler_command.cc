#include "cmd/scaler_command.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "adapters/io/files.h"
#include "adapters/keda/scaledobject_check.h"
#include "adapters/keda/scaler.h"
#include "cmd/metrics_endpoint.h"
#include "cmd/signals.h"

namespace tessera::cmd {
namespace {

int Fail(const std::string& message) {
  std::cerr << "tessera scaler: " << message << "\n";
  return 1;
}

// Forwards to Prometheus and keeps each query's answer, for --check to print.
class RecordingSource final : public adapters::MetricSource {
 public:
  explicit RecordingSource(adapters::MetricSource& inner) : inner_(inner) {}
  absl::StatusOr<adapters::PromValue> Query(const std::string& promql, absl::Time at) override {
    absl::StatusOr<adapters::PromValue> v = inner_.Query(promql, at);
    std::lock_guard<std::mutex> l(mu_);  // the scaler polls services concurrently
    answers_.insert_or_assign(promql, v);
    return v;
  }
  // Read after the poll.
  const absl::StatusOr<adapters::PromValue>* Answer(const std::string& promql) const {
    std::lock_guard<std::mutex> l(mu_);
    auto it = answers_.find(promql);
    return it == answers_.end() ? nullptr : &it->second;
  }

 private:
  adapters::MetricSource& inner_;
  mutable std::mutex mu_;
  std::map<std::string, absl::StatusOr<adapters::PromValue>> answers_;
};

// The cloud credentials the config asks for (sigv4, googleWorkloadIdentity,
// azureWorkloadIdentity), asked for once at start through the client the queries use (whose
// cache keeps them). What the environment lacks or names wrongly is an error: the scaler stops.
// An endpoint that does not answer now (STS, the Pod Identity agent, the metadata server, Entra
// ID) is a warning only: queries fail, and the scaler keeps its safe behaviour, until it answers.
absl::Status CheckCloudCredentials(const adapters::PromClient& prom) {
  const std::string field = prom.CloudCredentialsField();
  if (field.empty()) return absl::OkStatus();
  const absl::Status found = prom.CurrentCloudCredentials().status();
  if (absl::IsInvalidArgument(found) || absl::IsNotFound(found)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", found.message()));
  }
  if (!found.ok()) {
    std::cerr << absl::StrCat("tessera scaler: warning: ", field, ": ", found.message(),
                              " (queries fail until this answers)\n");
  }
  return absl::OkStatus();
}

// Which cloud credentials the queries are sent with and until when, for --check: the AWS chain
// picks the first source it finds (keys left in the environment win over IRSA), so say which.
// "" without sigv4 or a workload identity.
std::string CredentialsLine(const adapters::PromClient& prom) {
  const std::string field = prom.CloudCredentialsField();
  if (field.empty()) return "";
  absl::StatusOr<adapters::PromClient::CloudCredentials> c = prom.CurrentCloudCredentials();
  if (!c.ok()) return absl::StrCat("error: ", c.status().message());
  const std::string until =
      c->expiration == absl::InfiniteFuture()
          ? std::string("read again at every query")
          : absl::StrCat("valid until ", absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", c->expiration,
                                                          absl::UTCTimeZone()));
  const std::string& region = prom.config().sigv4_region;
  return region.empty()
             ? absl::StrCat("a bearer token from ", c->source, ", ", until)
             : absl::StrCat("AWS (SigV4 for aps in ", region, ") from ", c->source, ", ", until);
}

// One poll, printed: every query of every service with Prometheus' answer, then the decision
// the scaler would serve first.
int Check(const std::string& file, const adapters::ScalerConfig& config,
          adapters::PromSource& prom) {
  RecordingSource source(prom);
  RealClock clock;
  adapters::Scaler scaler(config, source, clock);
  scaler.PollOnce();
  std::printf("%s: %zu service%s, Prometheus %s\n", file.c_str(), config.services.size(),
              config.services.size() == 1 ? "" : "s", config.prometheus.url.c_str());
  if (std::string credentials = CredentialsLine(prom.client()); !credentials.empty()) {
    std::printf("credentials %s\n", credentials.c_str());
  }
  bool all_fresh = true;
  for (const adapters::ServiceConfig& svc : config.services) {
    std::printf("%s\n", svc.name.c_str());
    for (const auto& [label, query] : svc.Queries()) {
      if (query->empty()) continue;
      const absl::StatusOr<adapters::PromValue>* a = source.Answer(*query);
      std::string answer;
      if (a == nullptr) {
        answer = query == &svc.queue_query
                     ? "not read: no replica is ready, the activation query stands in"
                     : "not read: it stands in for the queue only while no replica is ready";
      } else if (!a->ok()) {
        answer = absl::StrCat("error: ", a->status().message());
      } else if ((*a)->empty) {
        answer = "no series";
      } else {
        answer = absl::StrFormat("%g", (*a)->value);
        const absl::StatusOr<adapters::PromValue>* ready = source.Answer(svc.ready_query);
        if (query == &svc.utilization_query && ready != nullptr && ready->ok() &&
            !(*ready)->empty && (*ready)->value == 0) {
          answer += " (not used while no replica is ready)";
        }
      }
      std::printf("  %-11s %s\n      = %s\n", label, query->c_str(), answer.c_str());
    }
    if (svc.throughput_query.empty()) {
      // Optional, but what it is for goes without it (docs/autoscaling.md, steps 4 and 5).
      std::printf(
          "  %-11s none: idleness is read from the waiting and running gauges alone, which miss "
          "short requests, and every backlog is scaled up for, even one that drains before a "
          "cold start (set throughputQuery, or server: vllm, triton, tgi or sglang)\n",
          "throughput");
    }
    absl::StatusOr<adapters::ScalerView> view = scaler.View(svc.name);
    if (!view.ok()) {  // not for a service of the config; kept total all the same
      std::printf("  decision    none: %s\n", std::string(view.status().message()).c_str());
      all_fresh = false;
      continue;
    }
    all_fresh = all_fresh && view->data_ok;
    std::printf("  decision    %d replica%s%s: %s\n", view->replicas,
                view->replicas == 1 ? "" : "s", view->data_ok ? "" : " (data missing: held)",
                view->reason.c_str());
    // The history rebuilt on start comes from range queries, which a proxy may refuse where it
    // allows instant ones, or one query's store where another's answers: each query the
    // backfill asks, asked over the last five minutes at its step.
    std::string history;
    if (!config.backfill) {
      history = "not rebuilt on start (prometheus.backfill: false)";
    } else {
      const absl::Duration step = config.BackfillStep();
      const int64_t count = std::max<int64_t>(1, absl::Minutes(5) / step);
      std::vector<std::string> samples;  // "queue 60": steps with a sample, per query
      // Every refusal, so that one run names all the queries a proxy's allow-list must admit;
      // but after a timeout the rest are not asked (each would wait as long).
      std::vector<std::pair<std::string, std::string>> refused;  // query, why
      const auto queries = svc.DistinctQueries();
      for (const auto& [label, query] : queries) {
        absl::StatusOr<adapters::PromSeries> range =
            prom.QueryRange(*query, clock.Now() - count * step, step, count, /*cancel=*/nullptr);
        if (!range.ok()) {
          refused.emplace_back(*query, range.status().message());
          if (absl::IsDeadlineExceeded(range.status())) break;
          continue;
        }
        int64_t with = 0;
        for (const std::optional<double>& p : range->points) with += p.has_value() ? 1 : 0;
        samples.push_back(absl::StrCat(label, " ", with));
      }
      if (!refused.empty()) {
        const bool alike = std::all_of(refused.begin(), refused.end(), [&](const auto& r) {
          return r.second == refused[0].second;
        });
        if (refused.size() == queries.size() && refused.size() > 1 && alike) {
          history =
              absl::StrCat("error: every range query (", refused.size(), "): ", refused[0].second);
        } else {
          history = absl::StrCat("error: ",
                                 absl::StrJoin(refused, "; ", [](std::string* out, const auto& r) {
                                   absl::StrAppend(out, r.first, ": ", r.second);
                                 }));
          if (refused.size() + samples.size() < queries.size()) {  // a timeout stopped it
            absl::StrAppend(&history, "; the rest not asked (each could wait as long)");
          } else if (!samples.empty()) {
            absl::StrAppend(&history, "; the others answer");
          }
        }
        absl::StrAppend(&history,
                        " (the scaler serves, and rebuilds no history until they answer: it tries "
                        "again, every 5m at most)");
      } else {
        history = absl::StrFormat(
            "range queries answer (the last %s in %d steps; with a sample: %s); %s rebuilt on "
            "start",
            absl::FormatDuration(count * step), count, absl::StrJoin(samples, ", "),
            absl::FormatDuration(autoscale::HistoryToRebuild(svc.policy)));
      }
    }
    std::printf("  history     %s\n", history.c_str());
  }
  return all_fresh ? 0 : 2;
}

// --check-scaledobjects: every ScaledObject in `files` against the config's services, offline.
int CheckPairing(const std::string& config_file, const adapters::ScalerConfig& config,
                 const std::vector<std::string>& files) {
  int objects = 0, paired = 0, errors = 0, warnings = 0;
  for (const std::string& file : files) {
    const bool in = file == "-";
    absl::StatusOr<std::string> text =
        in ? std::string(std::istreambuf_iterator<char>(std::cin), {}) : adapters::ReadFile(file);
    if (!text.ok()) return Fail(std::string(text.status().message()));
    absl::StatusOr<adapters::PairingReport> r =
        adapters::CheckScaledObjects(config, in ? "stdin" : file, *text);
    if (!r.ok()) return Fail(std::string(r.status().message()));
    for (size_t i = 0; i < r->objects.size(); ++i) {
      const adapters::PairedObject& o = r->objects[i];
      ++objects;
      if (o.service.empty()) {
        std::printf(
            "%s: not paired with Tessera (no trigger of type external or external-push "
            "with metadata.service)\n",
            o.object.c_str());
        continue;
      }
      ++paired;
      int e = 0, w = 0;
      for (const adapters::PairingFinding& f : r->findings) {
        if (f.object == i) ++(f.error ? e : w);
      }
      errors += e;
      warnings += w;
      std::printf("%s -> service %s: %s\n", o.object.c_str(), o.service.c_str(),
                  e + w == 0 ? "paired as deploy/scaler/scaledobject.yaml pairs it"
                             : absl::StrCat(e, e == 1 ? " error, " : " errors, ", w,
                                            w == 1 ? " warning" : " warnings")
                                   .c_str());
      for (const adapters::PairingFinding& f : r->findings) {
        if (f.object != i) continue;
        std::printf("  %-7s %s: %s\n", f.error ? "error" : "warning", f.where.c_str(),
                    f.message.c_str());
      }
    }
  }
  std::printf("%d ScaledObject%s, %d paired with %s: %d error%s, %d warning%s\n", objects,
              objects == 1 ? "" : "s", paired, config_file.c_str(), errors, errors == 1 ? "" : "s",
              warnings, warnings == 1 ? "" : "s");
  return errors > 0 ? 2 : 0;
}

}  // namespace

int RunScaler(const ScalerFlags& flags) {
  absl::Duration recheck;
  if (!absl::ParseDuration(flags.config_recheck, &recheck) || recheck < absl::ZeroDuration()) {
    return Fail(absl::StrCat("--config-recheck ", flags.config_recheck,
                             ": expected a duration (10s, 1m; 0s: never)"));
  }
  absl::StatusOr<std::string> text = adapters::ReadFile(flags.config_file);
  if (!text.ok()) return Fail(std::string(text.status().message()));
  absl::StatusOr<adapters::ScalerConfig> config =
      adapters::DecodeScalerConfig(flags.config_file, *text);
  if (!config.ok()) return Fail(std::string(config.status().message()));
  // Offline: neither the config's files nor Prometheus are needed to check a pairing.
  if (!flags.check_scaledobjects.empty()) {
    return CheckPairing(flags.config_file, *config, flags.check_scaledobjects);
  }
  if (std::vector<std::string> bad = config->UnreadableFiles(); !bad.empty()) {
    return Fail(absl::StrCat(flags.config_file, ": cannot read ", absl::StrJoin(bad, "; ")));
  }
  adapters::PromSource source(config->prometheus);
  if (absl::Status s = CheckCloudCredentials(source.client()); !s.ok()) {
    return Fail(absl::StrCat(flags.config_file, ": ", s.message()));
  }
  if (flags.check) return Check(flags.config_file, *config, source);
  RealClock clock;
  adapters::Scaler scaler(*config, source, clock, [&clock](const std::string& line) {
    // One write per line, so a reader (or a log shipper) never sees half of one.
    std::cerr << absl::StrCat(
        absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", clock.Now(), absl::UTCTimeZone()), " ", line, "\n");
  });
  // Read again while serving: the services' changes are taken without a restart.
  adapters::ConfigWatch watch{flags.config_file, *text, recheck};
  std::atomic<bool>& stop = StopOnSignal();
  std::atomic<bool> serving{false};  // the gRPC port is bound
  // Prometheus metrics of the decisions, signals and RPCs, /readyz, and /status (each service's
  // decision and why, in plain text), on their own HTTP port.
  MetricsEndpoint metrics([&scaler] { return scaler.MetricsText(); },
                          [&] { return serving.load() && !stop.load(); },
                          {{"/status", [&scaler] { return scaler.StatusText(); }}});
  if (absl::Status m = metrics.Listen(flags.metrics_listen); !m.ok()) {
    return Fail(std::string(m.message()));
  }
  absl::Status s = ServeAnnounced(
      stop,
      [&](int port) {
        serving = true;
        return absl::StrCat("tessera scaler: ", config->services.size(), " services, Prometheus ",
                            config->prometheus.url, ", listening on port ", port,
                            metrics.Announcement(), "\n");
      },
      [&](std::atomic<int>* bound) {
        return adapters::ServeScaler(scaler, flags.listen, &stop, bound,
                                     recheck > absl::ZeroDuration() ? &watch : nullptr);
      });
  metrics.Stop();
  if (!s.ok()) return Fail(std::string(s.message()));
  return 0;
}

}  // namespace tessera::cmd
