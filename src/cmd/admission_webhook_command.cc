#include "cmd/admission_webhook_command.h"

#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "adapters/k8s/admission.h"
#include "cmd/listen_address.h"
#include "cmd/metrics_endpoint.h"
#include "cmd/signals.h"

namespace tessera::cmd {
namespace {

int Fail(const std::string& message) {
  std::cerr << "tessera admission-webhook: " << message << "\n";
  return 1;
}

}  // namespace

int RunAdmissionWebhook(const WebhookFlags& flags) {
  std::string host;
  int port = -1;
  if (!SplitListen(flags.listen, &host, &port)) {
    return Fail(absl::StrCat("--listen ", flags.listen, ": expected HOST:PORT, e.g. 0.0.0.0:8443"));
  }
  if (flags.tls_cert.empty() || flags.tls_key.empty()) {
    return Fail("--tls-cert and --tls-key are required: the API server calls webhooks over HTTPS");
  }
  if (!flags.mps_directory.empty()) {
    if (absl::Status d = adapters::CheckMpsDirectory(flags.mps_directory); !d.ok()) {
      return Fail(absl::StrCat("--mps-directory: ", d.message()));
    }
  }
  // /metrics over plain HTTP on an address of its own: the webhook's port is HTTPS for the API
  // server, and Prometheus' pod scrapes speak plain HTTP unless told otherwise.
  adapters::AdmissionMetrics counted;
  MetricsEndpoint metrics([&counted] { return counted.Text(); });
  if (absl::Status m = metrics.Listen(flags.metrics_listen); !m.ok()) {
    return Fail(std::string(m.message()));
  }
  std::atomic<bool>& stop = StopOnSignal();
  absl::Status s = ServeAnnounced(
      stop,
      [&](int port) {
        return absl::StrCat(
            "tessera admission-webhook: listening on ", host, ":", port,
            " (HTTPS; POST /mutate, GET /healthz)", metrics.Announcement(),
            flags.mps_directory.empty()
                ? ""
                : absl::StrCat("; sharing pods reach the MPS daemons at ", flags.mps_directory),
            "\n");
      },
      [&](std::atomic<int>* bound) {
        auto log = [](const std::string& line) {
          // One write per line, so that lines from handshakes at once never interleave.
          std::cerr << absl::StrCat("tessera admission-webhook: ", line, "\n");
        };
        adapters::AdmissionOptions options{.scheduler_name = flags.scheduler_name,
                                           .mps_directory = flags.mps_directory,
                                           .log = log,
                                           .metrics = &counted};
        return adapters::ServeAdmissionWebhook(host, port, flags.tls_cert, flags.tls_key, options,
                                               &stop, bound);
      });
  metrics.Stop();
  if (!s.ok()) return Fail(std::string(s.message()));
  return 0;
}

}  // namespace tessera::cmd
