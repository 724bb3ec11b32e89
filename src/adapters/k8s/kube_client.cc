#include "adapters/k8s/kube_client.h"

#include <cstdlib>
#include <memory>
#include <mutex>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "adapters/io/files.h"
#include "adapters/k8s/yaml_reader.h"
#include "adapters/net/http_client.h"
#include "base/status.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace tessera::adapters {
namespace {

// A named entry ({name: X, <kind>: {...}}) of a kubeconfig list.
YAML::Node Named(const YAML::Node& list, const std::string& name, const std::string& kind) {
  if (list.IsSequence()) {
    for (const YAML::Node& item : list) {
      if (item["name"] && item["name"].as<std::string>("") == name) {
        return item[kind];
      }
    }
  }
  return YAML::Node();
}

std::string Str(const YAML::Node& map, const char* key) {
  if (!map.IsMap() || !map[key] || !map[key].IsScalar()) {
    return "";
  }
  return map[key].as<std::string>("");
}

absl::StatusOr<std::string> Base64Pem(const std::string& path, const char* field,
                                      const std::string& b64) {
  std::string out;
  if (!absl::Base64Unescape(b64, &out)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", field, ": invalid base64"));
  }
  return out;
}

// Relative file references in a kubeconfig are relative to the kubeconfig's directory.
std::string Resolve(const std::string& kubeconfig, const std::string& file) {
  if (file.empty() || file[0] == '/') {
    return file;
  }
  size_t slash = kubeconfig.rfind('/');
  return slash == std::string::npos ? file : kubeconfig.substr(0, slash + 1) + file;
}

}  // namespace

absl::StatusOr<KubeConfig> InClusterConfig(const std::string& secrets_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0') {
    return absl::FailedPreconditionError(
        "not running in a pod (KUBERNETES_SERVICE_HOST/PORT unset); pass --kubeconfig");
  }
  KubeConfig c;
  std::string h = host;
  if (h.find(':') != std::string::npos) {
    h = absl::StrCat("[", h, "]");  // IPv6
  }
  c.server = absl::StrCat("https://", h, ":", port);
  c.token_file = secrets_dir + "/token";
  c.ca_file = secrets_dir + "/ca.crt";
  TESSERA_RETURN_IF_ERROR(ReadFile(c.token_file).status());
  return c;
}

absl::StatusOr<KubeConfig> LoadKubeconfig(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> docs, ParseYamlDocuments(path, text));
  if (docs.empty() || !docs[0].IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected a kubeconfig (a map)"));
  }
  const YAML::Node& root = docs[0];
  std::string context_name = Str(root, "current-context");
  YAML::Node context = Named(root["contexts"], context_name, "context");
  if (context_name.empty() || !context.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": current-context \"", context_name, "\" names no entry of contexts"));
  }
  std::string cluster_name = Str(context, "cluster");
  YAML::Node cluster = Named(root["clusters"], cluster_name, "cluster");
  if (!cluster.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cluster \"", cluster_name, "\" of the current context not found"));
  }
  KubeConfig c;
  c.server = Str(cluster, "server");
  if (c.server.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": clusters[", cluster_name, "].server is missing"));
  }
  while (!c.server.empty() && c.server.back() == '/') {
    c.server.pop_back();
  }
  c.ca_file = Resolve(path, Str(cluster, "certificate-authority"));
  if (std::string d = Str(cluster, "certificate-authority-data"); !d.empty()) {
    TESSERA_ASSIGN_OR_RETURN(c.ca_data, Base64Pem(path, "certificate-authority-data", d));
  }
  c.insecure_skip_tls_verify = Str(cluster, "insecure-skip-tls-verify") == "true";
  std::string user_name = Str(context, "user");
  YAML::Node user = Named(root["users"], user_name, "user");
  if (!user_name.empty() && !user.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": user \"", user_name, "\" of the current context not found"));
  }
  if (user.IsMap()) {
    if (user["exec"] || user["auth-provider"]) {
      return absl::UnimplementedError(absl::StrCat(
          path, ": user \"", user_name,
          "\" authenticates with exec/auth-provider plugins, which Tessera does not run; use a "
          "token, a client certificate, or the in-cluster service account"));
    }
    c.token = Str(user, "token");
    c.token_file = Resolve(path, Str(user, "tokenFile"));
    c.client_cert_file = Resolve(path, Str(user, "client-certificate"));
    c.client_key_file = Resolve(path, Str(user, "client-key"));
    if (std::string d = Str(user, "client-certificate-data"); !d.empty()) {
      TESSERA_ASSIGN_OR_RETURN(c.client_cert_data, Base64Pem(path, "client-certificate-data", d));
    }
    if (std::string d = Str(user, "client-key-data"); !d.empty()) {
      TESSERA_ASSIGN_OR_RETURN(c.client_key_data, Base64Pem(path, "client-key-data", d));
    }
  }
  return c;
}

KubeClient::KubeClient(KubeConfig config) : config_(std::move(config)) {}

absl::StatusOr<KubeResponse> KubeClient::Request(const std::string& method, const std::string& path,
                                                 const std::string& body,
                                                 const std::string& content_type) const {
  std::string token = config_.token;
  if (!config_.token_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(token, ReadSecretFile(config_.token_file));
  }
  HttpRequest req;
  req.method = method;
  req.url = config_.server + path;
  req.body = body;
  req.timeout_ms = config_.timeout_ms;
  req.headers = {"Accept: application/json", "Content-Type: " + content_type,
                 "User-Agent: tessera-scheduler-extender"};
  if (!token.empty()) {
    req.headers.push_back("Authorization: Bearer " + token);
  }
  req.tls = {.ca_file = config_.ca_file,
             .ca_pem = config_.ca_data,
             .client_cert_file = config_.client_cert_file,
             .client_cert_pem = config_.client_cert_data,
             .client_key_file = config_.client_key_file,
             .client_key_pem = config_.client_key_data,
             .insecure_skip_verify = config_.insecure_skip_tls_verify};
  TESSERA_ASSIGN_OR_RETURN(HttpResponse r, Fetch(req));
  return KubeResponse{r.status, std::move(r.body)};
}

absl::Status KubeClient::Check(const KubeResponse& r, const std::string& what) {
  if (r.status >= 200 && r.status < 300) {
    return absl::OkStatus();
  }
  std::string message = r.body.substr(0, 300);
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    message = j["message"].get<std::string>();  // a metav1.Status
  }
  std::string text = absl::StrCat(what, ": HTTP ", r.status, ": ", message);
  switch (r.status) {
    case 404:
      return absl::NotFoundError(text);
    case 409:
      return absl::AlreadyExistsError(text);
    case 401:
    case 403:
      return absl::PermissionDeniedError(text);
    default:
      return r.status >= 500 ? absl::UnavailableError(text) : absl::FailedPreconditionError(text);
  }
}

}  // namespace tessera::adapters
