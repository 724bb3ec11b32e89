#include "adapters/objstore/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "adapters/io/json_text.h"
#include "adapters/net/cloud_tokens.h"
#include "adapters/net/http_client.h"
#include "adapters/objstore/s3_list.h"
#include "adapters/objstore/verify.h"
#include "base/status.h"
#include "nlohmann/json.hpp"

namespace tessera::adapters::objstore {
namespace {

std::string Hmac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

struct UrlParts {
  std::string host;  // with :port when given
  std::string path;
  std::string query;
};

absl::StatusOr<UrlParts> SplitUrl(const std::string& url) {
  size_t scheme = url.find("://");
  if (scheme == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("not an absolute URL: ", url));
  }
  size_t host_end = url.find_first_of("/?", scheme + 3);
  UrlParts p;
  p.host = url.substr(scheme + 3, host_end - (scheme + 3));
  std::string rest = host_end == std::string::npos ? "/" : url.substr(host_end);
  size_t q = rest.find('?');
  p.path = rest.substr(0, q);
  if (p.path.empty()) p.path = "/";
  if (q != std::string::npos) p.query = rest.substr(q + 1);
  if (p.host.empty()) return absl::InvalidArgumentError(absl::StrCat("URL without a host: ", url));
  return p;
}

}  // namespace

absl::StatusOr<std::string> CanonicalRequest(
    const std::string& method, const std::string& url,
    const std::vector<std::pair<std::string, std::string>>& headers,
    const std::string& payload_sha256, std::string* signed_headers, bool s3) {
  absl::StatusOr<UrlParts> p = SplitUrl(url);
  if (!p.ok()) return p.status();
  // Canonical URI: each segment URI-encoded once for S3, twice for every other service.
  TESSERA_ASSIGN_OR_RETURN(std::string path, UrlUnescape(p->path));
  std::string uri = UrlEscape(path, /*keep_slash=*/true);
  if (!s3) uri = UrlEscape(uri, /*keep_slash=*/true);
  std::vector<std::pair<std::string, std::string>> params;
  for (absl::string_view kv : absl::StrSplit(p->query, '&', absl::SkipEmpty())) {
    size_t eq = kv.find('=');
    TESSERA_ASSIGN_OR_RETURN(std::string k, UrlUnescape(kv.substr(0, eq)));
    TESSERA_ASSIGN_OR_RETURN(std::string v,
                             UrlUnescape(eq == absl::string_view::npos ? "" : kv.substr(eq + 1)));
    params.emplace_back(UrlEscape(k), UrlEscape(v));
  }
  std::sort(params.begin(), params.end());
  std::vector<std::string> q;
  q.reserve(params.size());
  for (const auto& [k, v] : params) q.push_back(absl::StrCat(k, "=", v));
  std::vector<std::pair<std::string, std::string>> h;
  for (const auto& [k, v] : headers) {
    // Trim and collapse sequential spaces.
    std::string val;
    for (char c : absl::StripAsciiWhitespace(v)) {
      if (c == ' ' && !val.empty() && val.back() == ' ') continue;
      val.push_back(c);
    }
    h.emplace_back(absl::AsciiStrToLower(k), val);
  }
  std::sort(h.begin(), h.end());
  std::string canon_headers;
  std::vector<std::string> names;
  for (const auto& [k, v] : h) {
    absl::StrAppend(&canon_headers, k, ":", v, "\n");
    names.push_back(k);
  }
  *signed_headers = absl::StrJoin(names, ";");
  return absl::StrCat(method, "\n", uri, "\n", absl::StrJoin(q, "&"), "\n", canon_headers, "\n",
                      *signed_headers, "\n", payload_sha256);
}

absl::StatusOr<std::vector<std::string>> SignV4(
    const std::string& method, const std::string& url,
    const std::vector<std::pair<std::string, std::string>>& signed_extra,
    const std::string& payload_sha256, const AwsCredentials& c, const std::string& region,
    const std::string& service, absl::Time now) {
  absl::StatusOr<UrlParts> p = SplitUrl(url);
  if (!p.ok()) return p.status();
  const std::string amz_date = absl::FormatTime("%Y%m%dT%H%M%SZ", now, absl::UTCTimeZone());
  const std::string day = amz_date.substr(0, 8);
  std::vector<std::pair<std::string, std::string>> headers = signed_extra;
  headers.emplace_back("host", p->host);
  headers.emplace_back("x-amz-content-sha256", payload_sha256);
  headers.emplace_back("x-amz-date", amz_date);
  if (!c.session_token.empty()) headers.emplace_back("x-amz-security-token", c.session_token);
  std::string signed_headers;
  absl::StatusOr<std::string> canonical =
      CanonicalRequest(method, url, headers, payload_sha256, &signed_headers, service == "s3");
  if (!canonical.ok()) return canonical.status();
  const std::string scope = absl::StrCat(day, "/", region, "/", service, "/aws4_request");
  const std::string to_sign =
      absl::StrCat("AWS4-HMAC-SHA256\n", amz_date, "\n", scope, "\n", Sha256Hex(*canonical));
  std::string key = Hmac("AWS4" + c.secret_access_key, day);
  key = Hmac(key, region);
  key = Hmac(key, service);
  key = Hmac(key, "aws4_request");
  const std::string signature = absl::BytesToHexString(Hmac(key, to_sign));
  std::vector<std::string> out = {
      absl::StrCat("Authorization: AWS4-HMAC-SHA256 Credential=", c.access_key_id, "/", scope,
                   ",SignedHeaders=", signed_headers, ",Signature=", signature),
      absl::StrCat("x-amz-date: ", amz_date),
      absl::StrCat("x-amz-content-sha256: ", payload_sha256)};
  if (!c.session_token.empty()) out.push_back("x-amz-security-token: " + c.session_token);
  return out;
}

std::string S3Location::ObjectUrl(const std::string& key) const {
  if (path_style)
    return absl::StrCat(endpoint, "/", bucket, "/", UrlEscape(key, /*keep_slash=*/true));
  size_t scheme = endpoint.find("://");
  return absl::StrCat(endpoint.substr(0, scheme + 3), bucket, ".", endpoint.substr(scheme + 3), "/",
                      UrlEscape(key, /*keep_slash=*/true));
}

absl::StatusOr<AwsCredentials> ParseSharedCredentials(const std::string& text,
                                                      const std::string& path,
                                                      const std::string& profile) {
  AwsCredentials c;
  bool found = false, in_profile = false;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[') {
      if (line.back() != ']') {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_no, ": expected a section header such as [default]"));
      }
      in_profile = absl::StripAsciiWhitespace(line.substr(1, line.size() - 2)) == profile;
      found = found || in_profile;
      continue;
    }
    size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no, ": expected [profile] or key = value"));
    }
    if (!in_profile) continue;
    std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(line.substr(eq + 1)));
    if (key == "aws_access_key_id") c.access_key_id = value;
    if (key == "aws_secret_access_key") c.secret_access_key = value;
    if (key == "aws_session_token") c.session_token = value;
  }
  if (!found) {
    return absl::NotFoundError(absl::StrCat(path, ": no profile [", profile, "]"));
  }
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": profile [", profile, "] needs both aws_access_key_id and aws_secret_access_key"));
  }
  return c;
}

namespace {

// An answer's expiry (RFC 3339, as STS and the container endpoints write it); InfiniteFuture
// when absent or unreadable (AwsCredentialCache then asks again at every Get).
absl::Time ParseExpiration(const std::string& text) {
  absl::Time t;
  std::string err;
  if (text.empty() || !absl::ParseTime(absl::RFC3339_full, text, &t, &err)) {
    return absl::InfiniteFuture();
  }
  return t;
}

}  // namespace

absl::StatusOr<AwsCredentials> ParseContainerCredentials(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) {
    return absl::InvalidArgumentError("container credentials: the answer is not a JSON object");
  }
  auto text = [&j](const char* key) { return JsonString(j, key); };
  if (!text("code").empty() || !text("message").empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat("container credentials: ", text("code"), ": ", text("message")));
  }
  AwsCredentials c;
  c.access_key_id = text("AccessKeyId");
  c.secret_access_key = text("SecretAccessKey");
  c.session_token = text("Token");
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    return absl::InvalidArgumentError(
        "container credentials: expected string AccessKeyId and SecretAccessKey");
  }
  c.expiration = ParseExpiration(text("Expiration"));
  return c;
}

absl::StatusOr<AwsCredentials> ParseStsCredentials(const std::string& action,
                                                   const std::string& xml) {
  if (std::string err = S3ErrorSummary(xml); !err.empty()) {
    return absl::PermissionDeniedError(absl::StrCat("STS ", action, ": ", err));
  }
  absl::StatusOr<std::string> creds = XmlText(xml, "Credentials");
  if (!creds.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("STS ", action, ": expected a <Credentials> element in the answer"));
  }
  AwsCredentials c;
  absl::StatusOr<std::string> id = XmlText(*creds, "AccessKeyId");
  absl::StatusOr<std::string> secret = XmlText(*creds, "SecretAccessKey");
  absl::StatusOr<std::string> token = XmlText(*creds, "SessionToken");
  if (!id.ok() || !secret.ok() || !token.ok() || id->empty() || secret->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "STS ", action, ": <Credentials> needs AccessKeyId, SecretAccessKey and SessionToken"));
  }
  c.access_key_id = *id;
  c.secret_access_key = *secret;
  c.session_token = *token;
  absl::StatusOr<std::string> expiration = XmlText(*creds, "Expiration");
  c.expiration = ParseExpiration(expiration.ok() ? *expiration : "");
  return c;
}

namespace {

// Sends `req` to a credentials endpoint and reads its answer with `parse`; `what` names the
// endpoint in errors (which carry its status and error text, never what was sent).
absl::StatusOr<AwsCredentials> AskForCredentials(
    const HttpRequest& req, const std::string& what,
    absl::StatusOr<AwsCredentials> (*parse)(const std::string&)) {
  absl::StatusOr<HttpResponse> r = Fetch(req);
  if (!r.ok()) return absl::UnavailableError(absl::StrCat(what, ": ", r.status().message()));
  absl::StatusOr<AwsCredentials> c = parse(r->body);
  if (r->status != 200) {
    return absl::PermissionDeniedError(absl::StrCat(
        what, ": HTTP ", r->status, c.ok() ? "" : absl::StrCat(" (", c.status().message(), ")")));
  }
  if (!c.ok()) {
    return absl::Status(c.status().code(), absl::StrCat(c.status().message(), " (", what, ")"));
  }
  return c;
}

// The regional STS endpoint, or AWS_ENDPOINT_URL_STS, without a trailing '/'.
std::string StsEndpoint(const std::function<std::string(const char*)>& env,
                        const std::string& region) {
  std::string endpoint = env("AWS_ENDPOINT_URL_STS");
  if (endpoint.empty()) endpoint = absl::StrCat("https://sts.", region, ".amazonaws.com");
  while (absl::EndsWith(endpoint, "/")) endpoint.pop_back();
  return endpoint;
}

// An STS query-API request: POST to `endpoint` of `action` for `role_arn` as session `session`,
// with `more` ("&Name=value...") appended to the form.
constexpr char kFormContentType[] = "application/x-www-form-urlencoded";
HttpRequest StsRequest(const std::string& endpoint, const std::string& action,
                       const std::string& role_arn, const std::string& session,
                       const std::string& more = "") {
  HttpRequest req;
  req.method = "POST";
  req.url = endpoint + "/";
  req.timeout_ms = 10000;
  req.headers = {absl::StrCat("Content-Type: ", kFormContentType), "Accept: application/xml"};
  req.body = absl::StrCat("Action=", action, "&Version=2011-06-15&RoleArn=", UrlEscape(role_arn),
                          "&RoleSessionName=", UrlEscape(session), more);
  return req;
}

// IRSA: exchanges the service account's projected token for role credentials.
absl::StatusOr<AwsCredentials> WebIdentityCredentials(
    const std::function<std::string(const char*)>& env, const std::string& region,
    const std::string& session_name) {
  TESSERA_ASSIGN_OR_RETURN(
      std::string token,
      ReadCredentialFile("AWS_WEB_IDENTITY_TOKEN_FILE", env("AWS_WEB_IDENTITY_TOKEN_FILE")));
  const std::string endpoint = StsEndpoint(env, region);
  std::string session = env("AWS_ROLE_SESSION_NAME");
  if (session.empty()) session = session_name;
  const HttpRequest req = StsRequest(endpoint, "AssumeRoleWithWebIdentity", env("AWS_ROLE_ARN"),
                                     session, absl::StrCat("&WebIdentityToken=", UrlEscape(token)));
  return AskForCredentials(req, absl::StrCat("STS AssumeRoleWithWebIdentity at ", endpoint),
                           ParseAssumeRoleWithWebIdentity);
}

// GETs the container credentials endpoint the environment names.
absl::StatusOr<AwsCredentials> ContainerCredentials(
    const std::function<std::string(const char*)>& env) {
  std::string url = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  const std::string var =
      url.empty() ? "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI" : "AWS_CONTAINER_CREDENTIALS_FULL_URI";
  if (url.empty()) {
    url = absl::StrCat("http://169.254.170.2", env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"));
  } else if (!absl::StartsWith(url, "https://")) {
    // Plain HTTP only to this host or the ECS / EKS Pod Identity agents.
    bool allowed = false;
    for (const char* host :
         {"http://127.0.0.1", "http://localhost", "http://[::1]", "http://169.254.170.2",
          "http://169.254.170.23", "http://[fd00:ec2::23]"}) {
      if (absl::StartsWith(url, host) &&
          (url.size() == strlen(host) || url[strlen(host)] == ':' || url[strlen(host)] == '/')) {
        allowed = true;
      }
    }
    if (!allowed) {
      return absl::InvalidArgumentError(
          absl::StrCat(var, " ", url,
                       ": expected https, a loopback address or the ECS / EKS Pod Identity agent"));
    }
  }
  HttpRequest req;
  req.url = url;
  req.timeout_ms = 5000;
  std::string token = env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  if (std::string file = env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); !file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(token,
                             ReadCredentialFile("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", file));
  }
  if (!token.empty()) req.headers.push_back("Authorization: " + token);
  return AskForCredentials(req, absl::StrCat("container credentials from ", url),
                           ParseContainerCredentials);
}

}  // namespace

absl::StatusOr<AwsCredentials> AwsCredentialsFromEnvironment(
    const std::string& region, const std::string& session_name,
    const char* (*getenv_fn)(const char*)) {
  const std::function<std::string(const char*)> env = EnvironmentReader(getenv_fn);
  AwsCredentials c;
  c.access_key_id = env("AWS_ACCESS_KEY_ID");
  c.secret_access_key = env("AWS_SECRET_ACCESS_KEY");
  c.session_token = env("AWS_SESSION_TOKEN");
  if (c.access_key_id.empty() != c.secret_access_key.empty()) {
    return absl::InvalidArgumentError(
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together (or neither)");
  }
  if (!c.anonymous()) c.source = "AWS_ACCESS_KEY_ID";
  if (c.anonymous()) {
    std::string file = env("AWS_SHARED_CREDENTIALS_FILE");
    const bool named_file = !file.empty();
    if (!named_file && !env("HOME").empty()) file = env("HOME") + "/.aws/credentials";
    std::string profile = env("AWS_PROFILE");
    const bool named_profile = !profile.empty();
    if (!named_profile) profile = "default";
    absl::StatusOr<std::string> text =
        file.empty() ? absl::NotFoundError("no $HOME")
                     : ReadCredentialFile("AWS_SHARED_CREDENTIALS_FILE", file);
    if (text.ok()) {
      absl::StatusOr<AwsCredentials> shared = ParseSharedCredentials(*text, file, profile);
      if (shared.ok()) {
        c = *shared;
        c.source = absl::StrCat("the shared credentials file ", file, ", profile ", profile);
      } else if (!absl::IsNotFound(shared.status()) || named_profile) {
        return shared.status();
      }
    } else if (named_file) {
      return text.status();
    } else if (named_profile) {
      return absl::InvalidArgumentError(absl::StrCat("AWS_PROFILE ", profile,
                                                     ": no shared credentials file (",
                                                     file.empty() ? "$HOME unset" : file, ")"));
    }
  }
  if (c.anonymous() && !env("AWS_WEB_IDENTITY_TOKEN_FILE").empty() &&
      !env("AWS_ROLE_ARN").empty()) {
    TESSERA_ASSIGN_OR_RETURN(c, WebIdentityCredentials(env, region, session_name));
    c.source = absl::StrCat("IRSA: role ", env("AWS_ROLE_ARN"), " through STS at ",
                            StsEndpoint(env, region));
  }
  if (c.anonymous() && (!env("AWS_CONTAINER_CREDENTIALS_FULL_URI").empty() ||
                        !env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").empty())) {
    TESSERA_ASSIGN_OR_RETURN(c, ContainerCredentials(env));
    c.source = "the container credentials endpoint (EKS Pod Identity, ECS)";
  }
  return c;
}

absl::StatusOr<AwsCredentials> AssumeRole(const AwsCredentials& base, const std::string& role_arn,
                                          const std::string& region,
                                          const std::string& session_name, absl::Time now,
                                          const char* (*getenv_fn)(const char*)) {
  const std::string endpoint = StsEndpoint(EnvironmentReader(getenv_fn), region);
  HttpRequest req = StsRequest(endpoint, "AssumeRole", role_arn, session_name);
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> signature,
                           SignV4("POST", req.url, {{"content-type", kFormContentType}},
                                  Sha256Hex(req.body), base, region, "sts", now));
  req.headers.insert(req.headers.end(), signature.begin(), signature.end());
  const std::string what = absl::StrCat("STS AssumeRole of ", role_arn, " at ", endpoint);
  TESSERA_ASSIGN_OR_RETURN(AwsCredentials c,
                           AskForCredentials(req, what, [](const std::string& xml) {
                             return ParseStsCredentials("AssumeRole", xml);
                           }));
  c.source = absl::StrCat(what, ", with credentials from ", base.source);
  return c;
}

absl::StatusOr<AwsCredentials> AwsCredentialCache::Fetch(absl::Time now) const {
  TESSERA_ASSIGN_OR_RETURN(AwsCredentials base,
                           AwsCredentialsFromEnvironment(region_, session_name_, getenv_fn_));
  if (role_arn_.empty()) return base;
  if (base.anonymous()) {
    return absl::InvalidArgumentError(absl::StrCat("no AWS credentials to assume ", role_arn_,
                                                   " with (expected ", kAwsCredentialSources, ")"));
  }
  return AssumeRole(base, role_arn_, region_, session_name_, now, getenv_fn_);
}

absl::StatusOr<S3Location> ParseS3Source(const std::string& source,
                                         const char* (*getenv_fn)(const char*)) {
  const std::function<std::string(const char*)> env = EnvironmentReader(getenv_fn);
  if (!absl::StartsWith(source, "s3://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("source ", source, ": expected s3://BUCKET/PREFIX"));
  }
  std::string rest = source.substr(5);
  size_t slash = rest.find('/');
  S3Location loc;
  loc.bucket = rest.substr(0, slash);
  loc.prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
  // Bucket naming rules (3-63 characters, lower-case letters, digits, '.', '-').
  if (loc.bucket.size() < 3 || loc.bucket.size() > 63 ||
      !std::all_of(loc.bucket.begin(), loc.bucket.end(), [](char c) {
        return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '.' || c == '-';
      })) {
    return absl::InvalidArgumentError(
        absl::StrCat("source ", source, ": bucket \"", loc.bucket,
                     "\" is not a valid S3 bucket name (3-63 of a-z, 0-9, '.', '-')"));
  }
  loc.region = env("AWS_REGION");
  if (loc.region.empty()) loc.region = env("AWS_DEFAULT_REGION");
  if (loc.region.empty()) loc.region = "us-east-1";
  loc.endpoint = env("AWS_ENDPOINT_URL_S3");
  if (loc.endpoint.empty()) loc.endpoint = env("AWS_ENDPOINT_URL");
  std::string force = absl::AsciiStrToLower(env("AWS_S3_FORCE_PATH_STYLE"));
  if (loc.endpoint.empty()) {
    loc.endpoint = absl::StrCat("https://s3.", loc.region, ".amazonaws.com");
    loc.path_style = force == "true" || force == "1" || absl::StrContains(loc.bucket, ".");
  } else {
    while (absl::EndsWith(loc.endpoint, "/")) loc.endpoint.pop_back();
    if (!absl::StartsWith(loc.endpoint, "http://") && !absl::StartsWith(loc.endpoint, "https://")) {
      return absl::InvalidArgumentError(
          absl::StrCat("AWS_ENDPOINT_URL ", loc.endpoint, ": expected http(s)://HOST[:PORT]"));
    }
    // Custom endpoints (MinIO, s3rver, Ceph) are path-style unless told otherwise.
    loc.path_style = !(force == "false" || force == "0");
  }
  TESSERA_ASSIGN_OR_RETURN(
      loc.credentials, AwsCredentialsFromEnvironment(loc.region, "tessera-node-agent", getenv_fn));
  loc.ca_file = env("AWS_CA_BUNDLE");
  return loc;
}

}  // namespace tessera::adapters::objstore
