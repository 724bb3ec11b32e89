// `tessera admission-webhook`: the mutating admission webhook that gives pods sharing a GPU the
// env that reads the extender's bind annotations. See docs/scheduler-extender.md.
#pragma once

#include <string>

namespace tessera::cmd {

struct WebhookFlags {
  std::string listen = "0.0.0.0:8443";
  std::string tls_cert;  // PEM chain (required; the API server calls webhooks over HTTPS only)
  std::string tls_key;   // PEM private key (required)
  std::string scheduler_name = "tessera-scheduler";  // "" leaves spec.schedulerName alone
  std::string metrics_listen;  // HOST:PORT for GET /metrics over plain HTTP; "" none
  std::string mps_directory;   // the nodes' MPS daemons' directory (AdmissionOptions); "" none
};

// Runs until SIGTERM or SIGINT. Exit status: 0 after a signal; 1 on bad flags, a certificate
// that does not load, or an address in use.
int RunAdmissionWebhook(const WebhookFlags& flags);

}  // namespace tessera::cmd
