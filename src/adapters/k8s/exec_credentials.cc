#include "adapters/k8s/exec_credentials.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "adapters/io/files.h"
#include "adapters/io/json_text.h"
#include "adapters/io/subprocess.h"
#include "base/status.h"
#include "nlohmann/json.hpp"

namespace tessera::adapters {
namespace {

// The string member `key` of `object` into `*out`; absent or null leaves it empty, another type
// is an error (its type named, its value not: it may be a credential).
absl::Status OptionalString(const nlohmann::json& object, const char* key, std::string* out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("status.", key, ": expected a string, found ", it->type_name()));
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

std::string Cut(std::string text) {
  if (text.size() > 300) text = absl::StrCat(text.substr(0, 300), "...");
  return text;
}

// The last line with text on it, cut to 300 bytes: what a failing plugin says about why.
std::string LastLine(const std::string& text) {
  std::string last;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (!trimmed.empty()) last = std::string(trimmed);
  }
  return Cut(last);
}

// Text on one line (runs of whitespace made one space), cut to 300 bytes.
std::string OneLine(const std::string& text) {
  return Cut(
      absl::StrJoin(absl::StrSplit(text, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty()), " "));
}

}  // namespace

absl::StatusOr<ExecCredential> ParseExecCredential(const std::string& api_version,
                                                   const std::string& output, absl::Time now) {
  if (JsonDepth(output) > kMaxJsonDepth) {
    return absl::InvalidArgumentError("its output is nested too deep to be an ExecCredential");
  }
  nlohmann::json j = nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    // Not quoted: a plugin that printed its token bare would have it end up in a log.
    return absl::InvalidArgumentError(absl::StrCat(
        "its output (", output.size(), " bytes) is not a JSON object; expected an ExecCredential"));
  }
  std::string version = JsonString(j, "apiVersion");
  if (version != api_version) {
    return absl::InvalidArgumentError(
        absl::StrCat("it answered apiVersion \"", version.substr(0, 80),
                     "\"; the kubeconfig asks for \"", api_version, "\""));
  }
  std::string kind = JsonString(j, "kind");
  if (kind != "ExecCredential") {
    return absl::InvalidArgumentError(
        absl::StrCat("it answered kind \"", kind.substr(0, 80), "\"; expected \"ExecCredential\""));
  }
  auto status = j.find("status");
  if (status == j.end() || !status->is_object()) {
    return absl::InvalidArgumentError("its ExecCredential has no status object");
  }
  ExecCredential c;
  TESSERA_RETURN_IF_ERROR(OptionalString(*status, "token", &c.token));
  TESSERA_RETURN_IF_ERROR(OptionalString(*status, "clientCertificateData", &c.client_cert_pem));
  TESSERA_RETURN_IF_ERROR(OptionalString(*status, "clientKeyData", &c.client_key_pem));
  if (c.client_cert_pem.empty() != c.client_key_pem.empty()) {
    return absl::InvalidArgumentError(
        c.client_key_pem.empty() ? "status.clientCertificateData without status.clientKeyData"
                                 : "status.clientKeyData without status.clientCertificateData");
  }
  if (c.token.empty() && c.client_cert_pem.empty()) {
    return absl::InvalidArgumentError(
        "its ExecCredential holds neither status.token nor status.clientCertificateData");
  }
  std::string expiry;
  TESSERA_RETURN_IF_ERROR(OptionalString(*status, "expirationTimestamp", &expiry));
  if (!expiry.empty()) {
    std::string err;
    if (!absl::ParseTime(absl::RFC3339_full, expiry, &c.expiration, &err)) {
      return absl::InvalidArgumentError(
          absl::StrCat("status.expirationTimestamp: expected an RFC 3339 time, found \"",
                       expiry.substr(0, 80), "\""));
    }
    if (c.expiration <= now) {
      // Kept, they would have the plugin run again before every request.
      return absl::InvalidArgumentError(
          absl::StrCat("status.expirationTimestamp ", expiry, " is not after now (",
                       absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone()), ")"));
    }
  }
  return c;
}

absl::StatusOr<ExecCredential> RunExecPlugin(const ExecPlugin& plugin, const Clock& clock) {
  std::string who =
      absl::StrCat("exec plugin ", plugin.command, " of kubeconfig user \"", plugin.user, "\": ");
  ProcessSpec spec;
  spec.argv.push_back(plugin.command);
  spec.argv.insert(spec.argv.end(), plugin.args.begin(), plugin.args.end());
  spec.env = plugin.env;
  nlohmann::json exec_info = plugin.exec_info;
  if (!plugin.cluster_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadFile(plugin.cluster_ca_file);
    if (!ca.ok()) {
      return absl::Status(ca.status().code(),
                          absl::StrCat(who, "the cluster's CA: ", ca.status().message()));
    }
    exec_info["spec"]["cluster"]["certificate-authority-data"] = absl::Base64Escape(*ca);
  }
  spec.env.emplace_back("KUBERNETES_EXEC_INFO", exec_info.dump());
  spec.timeout = plugin.timeout;
  absl::StatusOr<ProcessResult> r = RunProcess(spec, clock);
  if (!r.ok()) {
    std::string hint;
    if (absl::IsNotFound(r.status()) && !plugin.install_hint.empty()) {
      hint = absl::StrCat(" (installHint: ", OneLine(plugin.install_hint), ")");
    }
    return absl::Status(r.status().code(), absl::StrCat(who, r.status().message(), hint));
  }
  if (!r->Succeeded()) {
    std::string said = LastLine(r->err);
    return absl::UnavailableError(
        absl::StrCat(who, r->Outcome(), said.empty() ? "" : absl::StrCat(": ", said)));
  }
  absl::StatusOr<ExecCredential> c = ParseExecCredential(plugin.api_version, r->out, clock.Now());
  if (!c.ok()) {
    return absl::Status(c.status().code(), absl::StrCat(who, c.status().message()));
  }
  return c;
}

}  // namespace tessera::adapters
