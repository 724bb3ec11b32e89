#include "cmd/admission_webhook_command.h"

#include <iostream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "adapters/k8s/admission.h"
#include "cmd/listen_address.h"
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
  std::atomic<bool>& stop = StopOnSignal();
  std::atomic<int> bound{0};
  std::thread announce([&] {
    while (bound.load() == 0 && !stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (bound.load() > 0) {  // one write: a reader never sees half the line
      std::cerr << absl::StrCat("tessera admission-webhook: listening on ", host, ":", bound.load(),
                                " (HTTPS; POST /mutate, GET /healthz)\n");
    }
  });
  absl::Status s =
      adapters::ServeAdmissionWebhook(host, port, flags.tls_cert, flags.tls_key,
                                      {.scheduler_name = flags.scheduler_name}, &stop, &bound);
  stop.store(true);
  announce.join();
  if (!s.ok()) return Fail(std::string(s.message()));
  return 0;
}

}  // namespace tessera::cmd
