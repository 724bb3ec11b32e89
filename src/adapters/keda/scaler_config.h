// `tessera scaler`'s configuration (kind ScalerConfig, docs/autoscaling.md): the Prometheus
// endpoint, optional TLS, and one entry per service with its queries and policy knobs. Queries
// not given default from `server` (vllm, triton, tgi), `model` and `deployment`. Strict: unknown
// fields and bad values are errors naming the file, line, field and what was expected.
#pragma once

#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "adapters/prometheus/prom_client.h"
#include "autoscale/policy.h"

namespace tessera::adapters {

struct ServiceConfig {
  std::string name;
  std::string queue_query;        // waiting requests, whole service (required or from server)
  std::string running_query;      // "" = none (running counted as 0)
  std::string utilization_query;  // 0-1; "" = none
  std::string throughput_query;   // completions/s; "" = none
  std::string ready_query;        // ready replicas (required or from deployment)
  std::string starting_query;     // replicas not yet ready; "" = none
  // Demand seen outside the pods (a gateway's or ingress's queue or request rate), read in
  // place of queue_query while no replica is ready: the servers' own series vanish with their
  // pods, so without it a service at zero wakes only on what its config can see. "" = none.
  std::string activation_query;
  autoscale::AutoscalePolicy policy;
  // The service's entry as written (CanonicalYaml): a reload compares it to see what changed.
  std::string settings;

  // Every query with its name ("ready", "starting", "queue", "activation", "running",
  // "utilization", "throughput"); a query not set is "".
  std::array<std::pair<const char*, const std::string*>, 7> Queries() const {
    return {{{"ready", &ready_query},
             {"starting", &starting_query},
             {"queue", &queue_query},
             {"activation", &activation_query},
             {"running", &running_query},
             {"utilization", &utilization_query},
             {"throughput", &throughput_query}}};
  }
  // The queries set, each once (under its first name): what the backfill asks the range API for.
  std::vector<std::pair<const char*, const std::string*>> DistinctQueries() const;
  // Whether `other` reads the same series: every query, under each name, alike. What a service
  // learned from its signals (its load history, batch, window) belongs to its queries.
  bool SameQueries(const ServiceConfig& other) const;
};

struct ScalerConfig {
  // The `prometheus` section as the client takes it: URL, timeout, and for a Prometheus behind
  // authentication or TLS the credential files (read before every query, so rotated credentials
  // apply), extra headers and TLS options.
  PromConfig prometheus;
  absl::Duration poll_interval = absl::Seconds(5);
  // Each poll decides for the last multiple of poll_interval since the Unix epoch, less this:
  // samples scraped just before that instant are then in Prometheus for every replica that asks
  // (a managed Prometheus' ingestion delay, a slow scrape), so that replicas decide alike.
  absl::Duration query_offset = absl::ZeroDuration();
  // Services polled at once (each asks its queries in turn), so at most this many queries are in
  // flight: a poll of many services takes about services / concurrency times one service's.
  int poll_concurrency = 8;
  // On start, rebuild what the policy learns from the services' past (recurring load, batch per
  // replica, and the scale-down window, idle clock and demand trend a restart would reset) from
  // Prometheus' range queries (Scaler::Backfill); each request waits at most
  // prometheus.range_timeout_ms.
  bool backfill = true;
  std::string tls_cert_file;  // server certificate (PEM); with tls_key_file enables TLS
  std::string tls_key_file;
  std::string tls_client_ca_file;  // optional: require client certificates signed by it
  // How often the three files are read again, so that a renewed certificate (cert-manager
  // rewriting the mounted Secret) is served, and a renewed client CA trusted, without a restart.
  absl::Duration tls_reload_interval = absl::Minutes(1);
  std::vector<ServiceConfig> services;
  // Everything but `services` as written (CanonicalYaml): what a running scaler cannot take
  // without a restart (its Prometheus client, TLS, poll loop and backfill are built from it).
  std::string server_settings;

  const ServiceConfig* Find(const std::string& name) const;
  // The step of the history replayed on start: the poll interval, but no finer than 5 s
  // (Prometheus' samples change once per scrape; a month at 100 ms would be 27 million
  // decisions).
  absl::Duration BackfillStep() const { return std::max(poll_interval, absl::Seconds(5)); }
  std::string ServiceNames() const;  // "a, b", for messages
  // The Prometheus credential and TLS files that cannot be read now, as "field: reason" lines;
  // checked when the scaler starts (the server's own TLS files are checked by ServeScaler).
  std::vector<std::string> UnreadableFiles() const;
};

absl::StatusOr<ScalerConfig> DecodeScalerConfig(const std::string& file, const std::string& text);

}  // namespace tessera::adapters
