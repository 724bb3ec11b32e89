#include "adapters/k8s/kube_client.h"

#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "adapters/io/files.h"
#include "adapters/io/json_text.h"
#include "adapters/k8s/yaml_reader.h"
#include "adapters/net/http_client.h"
#include "base/status.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace tessera::adapters {
namespace {

// The `kind` map of the entry named `name` in the kubeconfig list `key` (contexts, clusters,
// users), e.g. clusters: [{name: prod, cluster: {...}}]. Two entries of one name are an error,
// as kubectl has them.
absl::StatusOr<Field> Named(const Field& root, const char* key, const std::string& name,
                            const char* kind, absl::string_view wanted_by) {
  Field list = root.Get(key);
  TESSERA_ASSIGN_OR_RETURN(std::vector<Field> items, list.Items());
  std::vector<std::string> names;
  std::optional<Field> found;
  for (const Field& item : items) {
    TESSERA_RETURN_IF_ERROR(item.RequireMap());
    Field name_field = item.Get("name");
    TESSERA_ASSIGN_OR_RETURN(std::string n, name_field.String());
    if (n != name) {
      names.push_back(absl::StrCat("\"", n, "\""));
    } else if (found.has_value()) {
      return name_field.Error(absl::StrCat("a second entry named \"", name, "\""));
    } else {
      found = item.Get(kind);
    }
  }
  if (!found.has_value()) {
    return list.Error(absl::StrCat("no entry named \"", name, "\" (", wanted_by, "); found ",
                                   names.empty() ? "none" : absl::StrJoin(names, ", ")));
  }
  if (!found->present()) {
    return found->Error("required field is missing");
  }
  TESSERA_RETURN_IF_ERROR(found->RequireMap());
  return *found;
}

// Fields kubectl understands and Tessera does not act on: refused rather than ignored, since
// ignoring them would connect to the wrong place or as the wrong identity.
absl::Status RefuseUnsupported(const Field& map, const std::vector<const char*>& keys,
                               absl::string_view why) {
  for (const char* k : keys) {
    Field f = map.Get(k);
    if (f.present()) {
      return f.Error(why);
    }
  }
  return absl::OkStatus();
}

// A DNS name, an IPv4 address or an IPv6 address (bare or in brackets); "" too (not set).
bool IsHostName(absl::string_view s) {
  if (absl::StartsWith(s, "[") && absl::EndsWith(s, "]")) {
    s = s.substr(1, s.size() - 2);
    if (s.empty()) return false;
  }
  const bool v6 = absl::StrContains(s, ':');
  for (char ch : s) {
    const bool ok = v6 ? (absl::ascii_isxdigit(ch) || ch == ':' || ch == '.')
                       : (absl::ascii_isalnum(ch) || ch == '.' || ch == '-');
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<std::string> Base64Pem(const Field& f) {
  TESSERA_ASSIGN_OR_RETURN(std::string b64, f.StringOr(""));
  std::string out;
  if (!absl::Base64Unescape(b64, &out)) {
    return f.Error("invalid base64");
  }
  return out;
}

absl::StatusOr<bool> Bool(const Field& f) {
  TESSERA_ASSIGN_OR_RETURN(std::string v, f.StringOr("false"));
  std::string lower = absl::AsciiStrToLower(v);
  if (lower == "true" || lower == "yes" || lower == "on") return true;
  if (lower == "false" || lower == "no" || lower == "off") return false;
  return f.Error(absl::StrCat("expected true or false, found \"", v, "\""));
}

// Relative file references in a kubeconfig are relative to the kubeconfig's directory.
absl::StatusOr<std::string> FileRef(const std::string& kubeconfig, const Field& f) {
  TESSERA_ASSIGN_OR_RETURN(std::string file, f.StringOr(""));
  if (file.empty() || file[0] == '/') {
    return file;
  }
  size_t slash = kubeconfig.rfind('/');
  return slash == std::string::npos ? file : kubeconfig.substr(0, slash + 1) + file;
}

// PEM from `key`-data, else the file `key` names: the -data field wins, as in kubectl.
absl::Status PemDataOrFile(const std::string& kubeconfig, const Field& map, const std::string& key,
                           std::string* data, std::string* file) {
  TESSERA_ASSIGN_OR_RETURN(*data, Base64Pem(map.Get(key + "-data")));
  if (data->empty()) {
    TESSERA_ASSIGN_OR_RETURN(*file, FileRef(kubeconfig, map.Get(key)));
  }
  return absl::OkStatus();
}

// A YAML value as JSON, as client-go converts a kubeconfig extension for KUBERNETES_EXEC_INFO:
// plain scalars that read as null, booleans or numbers become those, quoted ones stay strings.
// At most `*budget` values: YAML aliases can make a few lines stand for billions of them.
absl::StatusOr<nlohmann::json> YamlToJson(const Field& f, int* budget, int depth = 0) {
  if (depth > static_cast<int>(kMaxJsonDepth)) return f.Error("nested too deep");
  if (--*budget < 0) return f.Error("too large for an exec plugin's cluster config");
  const YAML::Node& n = f.node();
  if (!n.IsDefined() || n.IsNull()) return nullptr;
  if (n.IsSequence()) {
    nlohmann::json out = nlohmann::json::array();
    TESSERA_ASSIGN_OR_RETURN(std::vector<Field> items, f.Items());
    for (const Field& item : items) {
      TESSERA_ASSIGN_OR_RETURN(nlohmann::json v, YamlToJson(item, budget, depth + 1));
      out.push_back(std::move(v));
    }
    return out;
  }
  if (n.IsMap()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& kv : n) {
      std::string key = kv.first.Scalar();
      TESSERA_ASSIGN_OR_RETURN(nlohmann::json v, YamlToJson(f.Get(key), budget, depth + 1));
      out[key] = std::move(v);
    }
    return out;
  }
  const std::string& text = n.Scalar();
  if (n.Tag() == "?") {  // plain, not quoted
    if (text == "true" || text == "false") return text == "true";
    int64_t i = 0;
    double d = 0;
    if (absl::SimpleAtoi(text, &i)) return i;
    if (absl::SimpleAtod(text, &d) && std::isfinite(d) &&
        text.find_first_of("0123456789") != std::string::npos) {
      return d;
    }
  }
  return text;
}

// The kubeconfig's `users[].user.exec` stanza. What Tessera cannot honour is refused: an
// apiVersion other than v1 and v1beta1 (v1alpha1 left Kubernetes in 1.24), and interactiveMode
// Always (a daemon has no terminal to prompt on).
absl::StatusOr<ExecPlugin> DecodeExec(const std::string& kubeconfig, const std::string& user_name,
                                      const Field& exec, const Field& cluster,
                                      const KubeConfig& c) {
  TESSERA_RETURN_IF_ERROR(exec.RequireMap());
  TESSERA_RETURN_IF_ERROR(exec.OnlyKeys({"command", "args", "env", "apiVersion", "installHint",
                                         "provideClusterInfo", "interactiveMode"}));
  ExecPlugin p;
  p.user = user_name;
  TESSERA_ASSIGN_OR_RETURN(p.api_version, exec.Get("apiVersion").String());
  if (p.api_version != kExecCredentialV1 && p.api_version != kExecCredentialV1Beta1) {
    return exec.Get("apiVersion")
        .Error(absl::StrCat(
            "expected ", kExecCredentialV1, " or ", kExecCredentialV1Beta1, ", found \"",
            p.api_version, "\"",
            absl::EndsWith(p.api_version, "/v1alpha1") ? " (removed in Kubernetes 1.24)" : ""));
  }
  TESSERA_ASSIGN_OR_RETURN(p.command, exec.Get("command").String());
  if (p.command.empty()) return exec.Get("command").Error("expected a program, found \"\"");
  if (p.command.find('/') != std::string::npos && p.command[0] != '/') {
    // client-go: a relative path is relative to the kubeconfig's directory, a bare name is
    // looked up in PATH.
    size_t slash = kubeconfig.rfind('/');
    if (slash != std::string::npos) p.command = kubeconfig.substr(0, slash + 1) + p.command;
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<Field> args, exec.Get("args").Items());
  for (const Field& a : args) {
    TESSERA_ASSIGN_OR_RETURN(std::string arg, a.String());
    p.args.push_back(std::move(arg));
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<Field> env, exec.Get("env").Items());
  for (const Field& e : env) {
    TESSERA_RETURN_IF_ERROR(e.RequireMap());
    TESSERA_RETURN_IF_ERROR(e.OnlyKeys({"name", "value"}));
    TESSERA_ASSIGN_OR_RETURN(std::string name, e.Get("name").String());
    TESSERA_ASSIGN_OR_RETURN(std::string value, e.Get("value").String());
    p.env.emplace_back(std::move(name), std::move(value));
  }
  TESSERA_ASSIGN_OR_RETURN(p.install_hint, exec.Get("installHint").StringOr(""));
  Field mode_field = exec.Get("interactiveMode");
  TESSERA_ASSIGN_OR_RETURN(std::string mode, mode_field.StringOr(""));
  if (mode.empty() && p.api_version == kExecCredentialV1) {
    return mode_field.Error(
        "required with client.authentication.k8s.io/v1; Tessera runs the plugin without a "
        "terminal, so give Never (or IfAvailable)");
  }
  if (!mode.empty() && mode != "Never" && mode != "IfAvailable" && mode != "Always") {
    return mode_field.Error(
        absl::StrCat("expected Never, IfAvailable or Always, found \"", mode, "\""));
  }
  if (mode == "Always") {
    return mode_field.Error(
        "Always: this plugin needs a terminal to prompt on, and Tessera runs it without one; "
        "use a plugin mode that needs no prompt (e.g. kubelogin's workloadidentity or "
        "azurecli) and Never");
  }
  TESSERA_ASSIGN_OR_RETURN(bool provide_cluster, Bool(exec.Get("provideClusterInfo")));
  nlohmann::json info = {{"apiVersion", p.api_version},
                         {"kind", "ExecCredential"},
                         {"spec", {{"interactive", false}}}};
  if (provide_cluster) {
    nlohmann::json cl = {{"server", c.server}};
    // A CA file is read when the plugin runs (RunExecPlugin), as KubeClient reads it per request.
    if (!c.ca_data.empty()) cl["certificate-authority-data"] = absl::Base64Escape(c.ca_data);
    p.cluster_ca_file = c.ca_file;
    if (c.insecure_skip_tls_verify) cl["insecure-skip-tls-verify"] = true;
    if (!c.tls_server_name.empty()) cl["tls-server-name"] = c.tls_server_name;
    if (!c.proxy_url.empty()) cl["proxy-url"] = c.proxy_url;
    TESSERA_ASSIGN_OR_RETURN(std::vector<Field> extensions, cluster.Get("extensions").Items());
    for (const Field& x : extensions) {
      TESSERA_RETURN_IF_ERROR(x.RequireMap());
      TESSERA_ASSIGN_OR_RETURN(std::string name, x.Get("name").String());
      if (name == "client.authentication.k8s.io/exec") {
        int budget = 10000;
        TESSERA_ASSIGN_OR_RETURN(cl["config"], YamlToJson(x.Get("extension"), &budget));
      }
    }
    info["spec"]["cluster"] = std::move(cl);
  }
  p.exec_info = std::move(info);
  return p;
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

absl::StatusOr<KubeConfig> DecodeKubeconfig(const std::string& path, absl::string_view text) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> docs, ParseYamlDocuments(path, text));
  if (docs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": empty; expected a kubeconfig"));
  }
  Field root(path, docs[0], "");
  TESSERA_RETURN_IF_ERROR(root.RequireMap());
  TESSERA_ASSIGN_OR_RETURN(std::string context_name, root.Get("current-context").String());
  TESSERA_ASSIGN_OR_RETURN(Field context,
                           Named(root, "contexts", context_name, "context", "current-context"));
  TESSERA_ASSIGN_OR_RETURN(std::string cluster_name, context.Get("cluster").String());
  TESSERA_ASSIGN_OR_RETURN(Field cluster,
                           Named(root, "clusters", cluster_name, "cluster",
                                 absl::StrCat("the cluster of context \"", context_name, "\"")));
  KubeConfig c;
  TESSERA_ASSIGN_OR_RETURN(c.server, cluster.Get("server").String());
  while (!c.server.empty() && c.server.back() == '/') {
    c.server.pop_back();
  }
  if (!absl::StartsWith(c.server, "https://") && !absl::StartsWith(c.server, "http://")) {
    return cluster.Get("server").Error(
        absl::StrCat("expected an https:// (or http://) URL, found \"", c.server, "\""));
  }
  TESSERA_RETURN_IF_ERROR(
      PemDataOrFile(path, cluster, "certificate-authority", &c.ca_data, &c.ca_file));
  TESSERA_ASSIGN_OR_RETURN(c.insecure_skip_tls_verify,
                           Bool(cluster.Get("insecure-skip-tls-verify")));
  Field server_name = cluster.Get("tls-server-name");
  TESSERA_ASSIGN_OR_RETURN(c.tls_server_name, server_name.StringOr(""));
  if (!IsHostName(c.tls_server_name)) {
    return server_name.Error(
        absl::StrCat("expected a DNS name or an IP address, found \"", c.tls_server_name, "\""));
  }
  // client-go takes http, https and socks5 proxies here; libcurl speaks all three.
  Field proxy = cluster.Get("proxy-url");
  TESSERA_ASSIGN_OR_RETURN(c.proxy_url, proxy.StringOr(""));
  if (proxy.present() && !absl::StartsWith(c.proxy_url, "http://") &&
      !absl::StartsWith(c.proxy_url, "https://") && !absl::StartsWith(c.proxy_url, "socks5://")) {
    return proxy.Error(absl::StrCat("expected an http://, https:// or socks5:// URL, found \"",
                                    c.proxy_url, "\""));
  }
  TESSERA_ASSIGN_OR_RETURN(std::string user_name, context.Get("user").StringOr(""));
  if (user_name.empty()) {
    return c;  // no credentials: anonymous
  }
  TESSERA_ASSIGN_OR_RETURN(Field user,
                           Named(root, "users", user_name, "user",
                                 absl::StrCat("the user of context \"", context_name, "\"")));
  TESSERA_RETURN_IF_ERROR(RefuseUnsupported(
      user, {"auth-provider"},
      "authentication by an auth-provider, which client-go itself dropped (gcp and azure in "
      "Kubernetes 1.26); use the provider's exec plugin (gke-gcloud-auth-plugin, kubelogin, an "
      "OIDC helper), a token, a client certificate, or the in-cluster service account"));
  TESSERA_RETURN_IF_ERROR(RefuseUnsupported(
      user, {"username", "password"},
      "basic authentication, which API servers no longer accept (removed in Kubernetes 1.19); "
      "use a token or a client certificate"));
  TESSERA_RETURN_IF_ERROR(RefuseUnsupported(
      user, {"as", "as-uid", "as-groups", "as-user-extra"},
      "impersonation, which Tessera does not do; give its own identity the RBAC of "
      "deploy/scheduler-extender"));
  // A token overrides tokenFile, as in kubectl.
  TESSERA_ASSIGN_OR_RETURN(c.token, user.Get("token").StringOr(""));
  if (c.token.empty()) {
    TESSERA_ASSIGN_OR_RETURN(c.token_file, FileRef(path, user.Get("tokenFile")));
  }
  TESSERA_RETURN_IF_ERROR(
      PemDataOrFile(path, user, "client-certificate", &c.client_cert_data, &c.client_cert_file));
  TESSERA_RETURN_IF_ERROR(
      PemDataOrFile(path, user, "client-key", &c.client_key_data, &c.client_key_file));
  bool has_cert = !c.client_cert_data.empty() || !c.client_cert_file.empty();
  bool has_key = !c.client_key_data.empty() || !c.client_key_file.empty();
  if (has_cert != has_key) {
    return user.Error(has_cert ? "a client certificate without its client-key[-data]"
                               : "a client-key[-data] without its client certificate");
  }
  Field exec = user.Get("exec");
  if (exec.present()) {
    if (has_cert || !c.token.empty() || !c.token_file.empty()) {
      return exec.Error(absl::StrCat("exec together with ",
                                     has_cert ? "a client certificate" : "a token",
                                     "; give the user one way to authenticate"));
    }
    TESSERA_ASSIGN_OR_RETURN(c.exec, DecodeExec(path, user_name, exec, cluster, c));
  }
  return c;
}

absl::StatusOr<KubeConfig> LoadKubeconfig(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return DecodeKubeconfig(path, text);
}

KubeClient::KubeClient(KubeConfig config, const Clock* clock) : config_(std::move(config)) {
  static const RealClock real_clock;
  if (config_.exec.has_value()) {
    exec_ = std::make_unique<ExecCredentialSource>(*config_.exec,
                                                   clock != nullptr ? *clock : real_clock);
  }
}

KubeClient::~KubeClient() = default;

absl::StatusOr<HttpRequest> KubeClient::Prepare(const std::string& method,
                                                const std::string& path) const {
  std::string token = config_.token;
  if (!config_.token_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(token, ReadSecretFile(config_.token_file));
  }
  ExecCredential from_plugin;
  if (exec_ != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(from_plugin, exec_->Get());
    token = from_plugin.token;
  }
  HttpRequest req;
  req.method = method;
  req.url = config_.server + path;
  req.timeout_ms = config_.timeout_ms;
  req.proxy = config_.proxy_url;
  req.headers = {"Accept: application/json", "User-Agent: tessera-scheduler-extender"};
  if (!token.empty()) {
    req.headers.push_back("Authorization: Bearer " + token);
  }
  req.tls = {
      .ca_file = config_.ca_file,
      .ca_pem = config_.ca_data,
      .client_cert_file = config_.client_cert_file,
      .client_cert_pem = exec_ != nullptr ? from_plugin.client_cert_pem : config_.client_cert_data,
      .client_key_file = config_.client_key_file,
      .client_key_pem = exec_ != nullptr ? from_plugin.client_key_pem : config_.client_key_data,
      .insecure_skip_verify = config_.insecure_skip_tls_verify,
      .server_name = config_.tls_server_name};
  return req;
}

absl::StatusOr<KubeResponse> KubeClient::Request(const std::string& method, const std::string& path,
                                                 const std::string& body,
                                                 const std::string& content_type) const {
  for (int attempt = 0;; ++attempt) {
    TESSERA_ASSIGN_OR_RETURN(HttpRequest req, Prepare(method, path));
    req.body = body;
    req.headers.push_back("Content-Type: " + content_type);
    TESSERA_ASSIGN_OR_RETURN(HttpResponse r, Fetch(req));
    // 401: the plugin's credentials expired or were revoked before their expirationTimestamp.
    // The request was not carried out, so once the plugin has run again it is sent again.
    if (r.status == 401 && exec_ != nullptr) {
      exec_->Invalidate();
      if (attempt == 0) continue;
    }
    return KubeResponse{r.status, std::move(r.body)};
  }
}

absl::StatusOr<KubeResponse> KubeClient::Watch(
    const std::string& path, int timeout_s, const std::function<bool(absl::string_view)>& on_event,
    const std::atomic<bool>* stop) const {
  TESSERA_ASSIGN_OR_RETURN(HttpRequest req, Prepare("GET", path));
  // The server ends the watch after timeoutSeconds; the client allows it a margin on top.
  req.timeout_ms = (timeout_s + 30) * 1000;
  req.connect_timeout_ms = config_.timeout_ms;
  req.cancel = stop;
  std::string partial;  // an event split across pieces of the stream
  bool too_long = false;
  req.on_data = [&](absl::string_view piece) {
    for (size_t nl; (nl = piece.find('\n')) != absl::string_view::npos;) {
      partial.append(piece.data(), nl);
      piece.remove_prefix(nl + 1);
      if (!partial.empty() && !on_event(partial)) return false;
      partial.clear();
    }
    if (partial.size() + piece.size() > kMaxWatchEventBytes) {
      too_long = true;
      return false;
    }
    partial.append(piece.data(), piece.size());
    return true;
  };
  absl::StatusOr<HttpResponse> r = Fetch(req);
  if (too_long) {
    return absl::ResourceExhaustedError(
        absl::StrCat("GET ", path, ": a watch event longer than ", kMaxWatchEventBytes, " bytes"));
  }
  if (!r.ok()) return r.status();
  if (r->status == 401 && exec_ != nullptr) exec_->Invalidate();  // the next watch runs it again
  if (r->status >= 200 && r->status < 300 && !partial.empty() && !on_event(partial)) {
    return absl::CancelledError(absl::StrCat("GET ", path, ": stopped"));  // a last, unended line
  }
  return KubeResponse{r->status, std::move(r->body)};
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
