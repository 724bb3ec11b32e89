// A thin Kubernetes API client: just enough REST for the scheduler extender (list nodes and
// pods, get one, patch a pod's annotations, post a Binding), over libcurl. Configuration comes
// from the in-cluster service account (KUBERNETES_SERVICE_HOST/PORT, the token and CA under
// /var/run/secrets/kubernetes.io/serviceaccount) or a kubeconfig file (its current context:
// server, certificate-authority[-data], insecure-skip-tls-verify, tls-server-name, proxy-url,
// token / tokenFile,
// client-certificate[-data] and client-key[-data], or an exec credential plugin: see
// exec_credentials.h). The token file is re-read on every request (projected tokens rotate); a
// plugin's credentials are kept until shortly before they expire, and after a 401 the plugin
// runs again and the request is sent once more. Credentials never appear in errors.
//
// Example:
//   absl::StatusOr<KubeConfig> cfg = LoadKubeconfig("/home/me/.kube/config");
//   KubeClient kube(*cfg);
//   absl::StatusOr<KubeResponse> r = kube.Get("/api/v1/nodes");
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "adapters/k8s/exec_credentials.h"
#include "adapters/net/http_client.h"  // UrlEscape
#include "base/clock.h"

namespace tessera::adapters {

struct KubeConfig {
  std::string server;  // https://host:port (or http:// for tests)
  std::string token;
  std::string token_file;  // read per request when set
  std::string ca_file;
  std::string ca_data;  // PEM
  std::string client_cert_file;
  std::string client_cert_data;  // PEM
  std::string client_key_file;
  std::string client_key_data;  // PEM
  bool insecure_skip_tls_verify = false;
  // The name the server's certificate is verified for (and sent in SNI) instead of server's
  // host; "" = server's host.
  std::string tls_server_name;
  std::string proxy_url;  // the cluster's proxy-url; "" = the environment's proxy, if any
  int timeout_ms = 10000;
  std::optional<ExecPlugin> exec;  // credentials from a plugin instead of the fields above
};

// The in-cluster configuration; FailedPrecondition outside a pod.
absl::StatusOr<KubeConfig> InClusterConfig(
    const std::string& secrets_dir = "/var/run/secrets/kubernetes.io/serviceaccount");
// The current context of a kubeconfig file. Errors name the file, line and field, e.g.
//   kubeconfig:7:3: contexts: no entry named "prod" (current-context); found "dev"
// Credentials Tessera cannot use (auth-provider, basic authentication, impersonation, an exec
// plugin beside a token or certificate, or one that must prompt: interactiveMode Always) are
// refused rather than ignored. Relative file names are relative to the kubeconfig's directory;
// *-data overrides the file field beside it and token overrides tokenFile, as in kubectl.
absl::StatusOr<KubeConfig> LoadKubeconfig(const std::string& path);
// The same from the file's text (`path` names it in errors).
absl::StatusOr<KubeConfig> DecodeKubeconfig(const std::string& path, absl::string_view text);

struct KubeResponse {
  long status = 0;
  std::string body;
};

class KubeClient {
 public:
  // `clock` (borrowed; a RealClock when null) dates an exec plugin's credentials.
  explicit KubeClient(KubeConfig config, const Clock* clock = nullptr);
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;
  const KubeConfig& config() const { return config_; }

  // `path` starts with "/api/...". Transport errors are Unavailable; HTTP statuses come back
  // in the response.
  absl::StatusOr<KubeResponse> Request(const std::string& method, const std::string& path,
                                       const std::string& body = "",
                                       const std::string& content_type = "application/json") const;
  absl::StatusOr<KubeResponse> Get(const std::string& path) const { return Request("GET", path); }

  // A watch: `path` asks for one (watch=1, timeoutSeconds=`timeout_s`). Each event, a line of
  // JSON, goes to `on_event` as it arrives, until the server ends the watch (OK, with an empty
  // body), `on_event` returns false or `*stop` becomes true (both Cancelled), or an event runs
  // past kMaxWatchEventBytes (ResourceExhausted). A non-2xx answer comes back as a response, as
  // from Request.
  static constexpr size_t kMaxWatchEventBytes = size_t{16} << 20;  // etcd holds 1.5 MiB objects
  absl::StatusOr<KubeResponse> Watch(const std::string& path, int timeout_s,
                                     const std::function<bool(absl::string_view)>& on_event,
                                     const std::atomic<bool>* stop) const;

  // Status from a response: OK for 2xx, else an error with the API's Status message.
  static absl::Status Check(const KubeResponse& r, const std::string& what);

 private:
  // Method, URL, credentials and TLS of a request to `path`; the token file is read (or the
  // exec plugin's credentials got) here.
  absl::StatusOr<HttpRequest> Prepare(const std::string& method, const std::string& path) const;
  KubeConfig config_;
  std::unique_ptr<ExecCredentialSource> exec_;  // when config_.exec is set
};

}  // namespace tessera::adapters
