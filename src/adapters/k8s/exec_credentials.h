// Kubernetes API credentials from a kubeconfig's exec plugin (client-go's credential plugins,
// KEP-541): what EKS (`aws eks get-token`), GKE (`gke-gcloud-auth-plugin`), AKS (`kubelogin`) and
// OIDC helpers write into the kubeconfigs they hand out. Used by KubeClient when the scheduler
// extender runs outside the cluster with such a kubeconfig.
//
// The protocol (client.authentication.k8s.io, v1 or v1beta1): the plugin is run with the
// kubeconfig's args and env added to ours, no terminal, and KUBERNETES_EXEC_INFO holding an
// ExecCredential {"apiVersion", "kind": "ExecCredential", "spec": {"interactive": false,
// "cluster": {...} when provideClusterInfo}}. It prints an ExecCredential of the same apiVersion
// whose "status" holds a bearer "token" and/or a PEM "clientCertificateData" with its
// "clientKeyData", and optionally an RFC 3339 "expirationTimestamp". Credentials are kept until
// shortly before that time (KeptCredentials: kRefreshBefore, and kRetryAfterFailure between
// failed runs), or for good when there is none; a 401 from the API server drops them, so the
// plugin runs again.
//
// Example:
//   ExecCredentialSource source(plugin, clock);
//   absl::StatusOr<ExecCredential> c = source.Get();  // c->token, c->client_cert_pem, ...
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "adapters/net/cloud_tokens.h"
#include "base/clock.h"
#include "nlohmann/json.hpp"

namespace tessera::adapters {

inline constexpr char kExecCredentialV1[] = "client.authentication.k8s.io/v1";
inline constexpr char kExecCredentialV1Beta1[] = "client.authentication.k8s.io/v1beta1";

// A kubeconfig user's `exec` stanza, as LoadKubeconfig reads it.
struct ExecPlugin {
  std::string user;     // the kubeconfig user it belongs to, for messages
  std::string command;  // a relative path with a '/' already resolved against the kubeconfig's
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string api_version;  // kExecCredentialV1 or kExecCredentialV1Beta1
  std::string install_hint;
  // KUBERNETES_EXEC_INFO, built when the kubeconfig is read (spec.cluster included when
  // provideClusterInfo is true)...
  nlohmann::json exec_info;
  // ...but for the cluster's certificate-authority file, read at each run into
  // spec.cluster.certificate-authority-data ("" for none, or when the CA is inline).
  std::string cluster_ca_file;
  absl::Duration timeout = absl::Seconds(30);
};

struct ExecCredential {
  std::string token;
  std::string client_cert_pem;
  std::string client_key_pem;
  absl::Time expiration = absl::InfiniteFuture();  // none given: kept until refused
};

// The plugin's answer. InvalidArgument, naming what is wrong and never quoting a credential:
// not JSON, another apiVersion or kind than asked for, no status, neither a token nor a client
// certificate, a certificate without its key (or the reverse), an expirationTimestamp that is
// not RFC 3339 or not after `now`. (Exposed for tests and the fuzzer.)
absl::StatusOr<ExecCredential> ParseExecCredential(const std::string& api_version,
                                                   const std::string& output, absl::Time now);

// Runs the plugin (RunProcess) and parses its answer. Errors start with "exec plugin COMMAND of
// kubeconfig user USER: " and say what happened: not found (with the installHint), an exit
// status with the last line it wrote on stderr, a timeout, or what ParseExecCredential refused.
absl::StatusOr<ExecCredential> RunExecPlugin(const ExecPlugin& plugin, const Clock& clock);

// RunExecPlugin, kept. Thread-safe; one run at a time.
class ExecCredentialSource {
 public:
  ExecCredentialSource(ExecPlugin plugin, const Clock& clock)
      : plugin_(std::move(plugin)), clock_(clock), kept_(/*keep_unexpiring=*/true) {}
  ExecCredentialSource(const ExecCredentialSource&) = delete;
  ExecCredentialSource& operator=(const ExecCredentialSource&) = delete;

  absl::StatusOr<ExecCredential> Get() {
    return kept_.Get(clock_.Now(), [&] { return RunExecPlugin(plugin_, clock_); });
  }
  // The API server answered 401: the next Get runs the plugin again.
  void Invalidate() { kept_.Invalidate(); }

 private:
  const ExecPlugin plugin_;
  const Clock& clock_;
  KeptCredentials<ExecCredential> kept_;
};

}  // namespace tessera::adapters
