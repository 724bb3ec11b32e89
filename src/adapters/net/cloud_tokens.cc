#include "adapters/net/cloud_tokens.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "adapters/io/files.h"
#include "adapters/io/json_text.h"
#include "adapters/net/http_client.h"
#include "base/status.h"
#include "nlohmann/json.hpp"

namespace tessera::adapters {

using nlohmann::json;

absl::StatusOr<AccessToken> ParseCloudTokenAnswer(const std::string& what, long status,
                                                  const std::string& body, absl::Time now) {
  const json j = json::parse(body, nullptr, false);
  if (status != 200) {
    std::string detail;
    if (j.is_object()) {
      detail = JsonString(j, "error");
      if (std::string d = JsonString(j, "error_description"); !d.empty()) {
        // Entra's descriptions run to several lines with trace ids: the first says what is wrong.
        absl::StrAppend(&detail, detail.empty() ? "" : ": ", d.substr(0, d.find_first_of("\r\n")));
      }
    }
    return absl::PermissionDeniedError(absl::StrCat(
        what, ": HTTP ", status, detail.empty() ? "" : absl::StrCat(" (", detail, ")")));
  }
  if (!j.is_object()) return absl::InvalidArgumentError(what + ": the answer is not a JSON object");
  AccessToken t;
  t.token = JsonString(j, "access_token");
  double seconds = -1;
  if (auto it = j.find("expires_in"); it != j.end()) {
    if (it->is_number()) {
      seconds = it->get<double>();
    } else if (it->is_string()) {
      seconds = std::strtod(it->get<std::string>().c_str(), nullptr);
    }
  }
  const std::string type = JsonString(j, "token_type");
  if (t.token.empty() || !(seconds >= 1 && seconds < 1e7) ||
      (!type.empty() && !absl::EqualsIgnoreCase(type, "Bearer"))) {
    return absl::InvalidArgumentError(
        what + ": expected a Bearer access_token and expires_in (seconds) in the answer");
  }
  t.expiration = now + absl::Seconds(std::floor(seconds));
  return t;
}

absl::StatusOr<std::string> ReadCredentialFile(const std::string& var, const std::string& path) {
  absl::StatusOr<std::string> text = ReadSecretFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(var, " ", text.status().message()));
  }
  if (text->empty()) return absl::InvalidArgumentError(absl::StrCat(var, " ", path, ": is empty"));
  return text;
}

std::function<std::string(const char*)> EnvironmentReader(const char* (*getenv_fn)(const char*)) {
  return [getenv_fn](const char* name) -> std::string {
    const char* v = getenv_fn != nullptr ? getenv_fn(name) : std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
  };
}

absl::Time RefreshTime(absl::Time now, absl::Time expiration) {
  return std::max(expiration - kRefreshBefore, now + (expiration - now) / 2);
}

absl::StatusOr<AccessToken> FetchCloudToken(CloudIdentity identity, const std::string& scope,
                                            absl::Time now, const char* (*getenv_fn)(const char*)) {
  const std::function<std::string(const char*)> env = EnvironmentReader(getenv_fn);
  HttpRequest req;
  req.timeout_ms = 10000;
  req.max_response_bytes = size_t{1} << 20;
  std::string what;
  if (identity == CloudIdentity::kGoogle) {
    std::string host = env("GCE_METADATA_HOST");
    if (host.empty()) host = "metadata.google.internal";
    req.url = absl::StrCat("http://", host,
                           "/computeMetadata/v1/instance/service-accounts/default/token");
    req.headers = {"Metadata-Flavor: Google"};
    what = absl::StrCat("the GKE metadata server at ", host);
  } else {
    const std::string tenant = env("AZURE_TENANT_ID");
    const std::string client = env("AZURE_CLIENT_ID");
    const std::string file = env("AZURE_FEDERATED_TOKEN_FILE");
    if (tenant.empty() || client.empty() || file.empty()) {
      return absl::InvalidArgumentError(
          "Azure workload identity: expected AZURE_TENANT_ID, AZURE_CLIENT_ID and "
          "AZURE_FEDERATED_TOKEN_FILE in the environment (the AKS workload identity webhook sets "
          "them for a pod labelled azure.workload.identity/use: \"true\" whose service account "
          "names a client id)");
    }
    TESSERA_ASSIGN_OR_RETURN(std::string assertion,
                             ReadCredentialFile("AZURE_FEDERATED_TOKEN_FILE", file));
    std::string authority = env("AZURE_AUTHORITY_HOST");
    if (authority.empty()) authority = "https://login.microsoftonline.com/";
    if (!absl::EndsWith(authority, "/")) authority += "/";
    req.method = "POST";
    req.url = absl::StrCat(authority, UrlEscape(tenant), "/oauth2/v2.0/token");
    req.headers = {"Content-Type: application/x-www-form-urlencoded", "Accept: application/json"};
    req.body = absl::StrCat("client_id=", UrlEscape(client), "&scope=", UrlEscape(scope),
                            "&grant_type=client_credentials&client_assertion_type=",
                            UrlEscape("urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                            "&client_assertion=", UrlEscape(assertion));
    what = absl::StrCat("Microsoft Entra ID at ", authority);
  }
  absl::StatusOr<HttpResponse> r = Fetch(req);
  if (!r.ok()) return absl::UnavailableError(absl::StrCat(what, ": ", r.status().message()));
  absl::StatusOr<AccessToken> t = ParseCloudTokenAnswer(what, r->status, r->body, now);
  if (t.ok()) t->source = what;
  return t;
}

}  // namespace tessera::adapters
