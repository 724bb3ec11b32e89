// `--metrics-listen` for the long-running subcommands: GET /metrics (Prometheus' text format) on
// an address of its own, and nothing else there (404), so a service whose main port must stay
// private (the scheduler extender's /bind) can still be scraped. With a readiness function, GET
// /readyz too (200 "ok", or 503): a plain-HTTP readiness probe for a main port the kubelet cannot
// probe itself (the scaler's gRPC port with TLS: the kubelet's grpc probe speaks no TLS). With
// `pages`, GET on each of their paths answers its text (plain text, for an operator's curl: the
// scaler's /status).
//
// Example:
//   MetricsEndpoint metrics([&] { return scaler.MetricsText(); });
//   if (absl::Status s = metrics.Listen(flags.metrics_listen); !s.ok()) ...  // "" = none
//   std::cerr << "... listening on port 9095" << metrics.Announcement() << "\n";
//   metrics.Stop();
#pragma once

#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "adapters/http/server.h"

namespace tessera::cmd {

class MetricsEndpoint {
 public:
  using Pages = std::map<std::string, std::function<std::string()>>;
  explicit MetricsEndpoint(std::function<std::string()> text, std::function<bool()> ready = nullptr,
                           Pages pages = {});
  // Serves on `address` (HOST:PORT, port 0 = any); an empty address serves nothing. The error
  // names the --metrics-listen flag.
  absl::Status Listen(const std::string& address);
  // ", metrics on port N" once listening, else "".
  std::string Announcement() const;
  void Stop() { server_.Stop(); }

 private:
  adapters::HttpServer server_;
  bool listening_ = false;
};

}  // namespace tessera::cmd
