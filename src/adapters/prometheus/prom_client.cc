#include "adapters/prometheus/prom_client.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "adapters/io/files.h"
#include "adapters/io/json_text.h"
#include "adapters/objstore/sigv4.h"
#include "base/status.h"
#include "nlohmann/json.hpp"

namespace tessera::adapters {
namespace {

using nlohmann::json;

// [<unix seconds>, "<value>"], the value as sent (NaN and +-Inf included).
absl::StatusOr<PromValue> RawSample(const json& pair) {
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_string()) {
    return absl::InternalError(
        absl::StrCat("Prometheus: expected a sample [time, \"value\"], found ", QuoteJson(pair)));
  }
  const double t = pair[0].get<double>();
  // Within +-10^11 s of 1970 (years -1200 to 5100): beyond that no clock is, and the
  // conversion to microseconds would overflow.
  if (!(std::abs(t) <= 1e11)) {
    return absl::InternalError(absl::StrCat("Prometheus: sample time ", QuoteJson(pair[0]),
                                            " is not a Unix time in seconds"));
  }
  PromValue v;
  v.sampled = absl::FromUnixMicros(static_cast<int64_t>(std::llround(t * 1e6)));
  std::string text = pair[1].get<std::string>();
  if (!absl::SimpleAtod(text, &v.value)) {
    return absl::InternalError(absl::StrCat("Prometheus: sample value \"", text, "\""));
  }
  return v;
}

// The same, for an instant query: a value that is not a number is no usable sample.
absl::StatusOr<PromValue> Sample(const json& pair) {
  TESSERA_ASSIGN_OR_RETURN(PromValue v, RawSample(pair));
  if (!std::isfinite(v.value)) {
    return absl::UnavailableError(absl::StrCat("Prometheus returned ", pair[1].get<std::string>(),
                                               " (not a number): no usable sample"));
  }
  return v;
}

// The checks every response shares: Prometheus' error body, an HTTP error without one, and the
// success envelope. The `data` object on success.
absl::StatusOr<json> ResponseData(long http_status, const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && JsonString(j, "status") == "error") {
    std::string type = JsonString(j, "errorType");
    if (type.empty()) type = "unknown";
    std::string text = absl::StrCat("Prometheus error (", type, ", HTTP ", http_status,
                                    "): ", JsonString(j, "error"));
    if (type == "bad_data") return absl::InvalidArgumentError(text);
    return absl::UnavailableError(text);
  }
  if (http_status < 200 || http_status >= 300) {
    return absl::UnavailableError(
        absl::StrCat("Prometheus: HTTP ", http_status, ": ", body.substr(0, 200)));
  }
  if (!j.is_object() || JsonString(j, "status") != "success" || !j.contains("data") ||
      !j["data"].is_object()) {
    return absl::InternalError(
        absl::StrCat("Prometheus: not a query response: ", body.substr(0, 200)));
  }
  return std::move(j["data"]);
}

// A query's only series from `result`; nullptr when it has none; an error for several.
absl::StatusOr<const json*> OneSeries(const json& result) {
  if (result.empty()) return nullptr;
  if (result.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Prometheus: the query returned ", result.size(),
                     " series; aggregate it to one (sum(...), avg(...))"));
  }
  return &result[0];
}

// A credential file, re-read for every query; any failure leaves the signal missing (Unavailable).
absl::StatusOr<std::string> Secret(const std::string& what, const std::string& file) {
  absl::StatusOr<std::string> secret = ReadSecretFile(file);
  if (!secret.ok()) {
    return absl::UnavailableError(
        absl::StrCat("Prometheus ", what, ": ", secret.status().message()));
  }
  if (secret->empty()) {
    return absl::UnavailableError(absl::StrCat("Prometheus ", what, " file ", file, " is empty"));
  }
  return *secret;
}

// What sigv4 says when it finds no AWS credentials anywhere in the environment.
std::string NoAwsCredentials() {
  return absl::StrCat("no AWS credentials in the environment (expected ",
                      objstore::kAwsCredentialSources, ")");
}

}  // namespace

absl::StatusOr<PromValue> ParsePromResponse(long http_status, const std::string& body) {
  TESSERA_ASSIGN_OR_RETURN(const json data, ResponseData(http_status, body));
  std::string type = JsonString(data, "resultType");
  // (A ternary with json() in one arm would copy the result, recursing once per level of it.)
  static const json kNull;
  const json& result = data.contains("result") ? data["result"] : kNull;
  if (type == "scalar") {
    return Sample(result);
  }
  if (type != "vector" || !result.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Prometheus: expected an instant vector or scalar, found ", type,
                     " (use an instant query that returns one number)"));
  }
  TESSERA_ASSIGN_OR_RETURN(const json* series, OneSeries(result));
  if (series == nullptr) {
    PromValue v;
    v.empty = true;
    return v;
  }
  if (!series->is_object() || !series->contains("value")) {
    return absl::InternalError("Prometheus: series without a value");
  }
  return Sample((*series)["value"]);
}

absl::StatusOr<std::vector<std::optional<double>>> ParsePromRangeResponse(long http_status,
                                                                          const std::string& body,
                                                                          absl::Time start,
                                                                          absl::Duration step,
                                                                          int64_t count) {
  TESSERA_ASSIGN_OR_RETURN(const json data, ResponseData(http_status, body));
  std::string type = JsonString(data, "resultType");
  static const json kNull;
  const json& result = data.contains("result") ? data["result"] : kNull;
  if (type != "matrix" || !result.is_array()) {
    return absl::InternalError(
        absl::StrCat("Prometheus: expected a range query's matrix, found ", type));
  }
  std::vector<std::optional<double>> points(static_cast<size_t>(std::max<int64_t>(count, 0)));
  TESSERA_ASSIGN_OR_RETURN(const json* series, OneSeries(result));
  if (series == nullptr) return points;  // no series at any step
  if (!series->is_object() || !series->contains("values") || !(*series)["values"].is_array()) {
    return absl::InternalError("Prometheus: series without values");
  }
  for (const json& pair : (*series)["values"]) {
    TESSERA_ASSIGN_OR_RETURN(PromValue v, RawSample(pair));
    // Prometheus evaluates at start + k x step exactly; its times are in milliseconds.
    const double k = absl::FDivDuration(v.sampled - start, step);
    const int64_t i = std::llround(k);
    if (i < 0 || i >= count || std::abs(k - static_cast<double>(i)) > 0.01) {
      return absl::InternalError(absl::StrCat("Prometheus: sample at ", QuoteJson(pair[0]),
                                              " is not a step of the range asked for"));
    }
    points[static_cast<size_t>(i)] = v.value;
  }
  return points;
}

PromClient::PromClient(PromConfig config, const Clock* clock) : config_(std::move(config)) {
  static const RealClock real_clock;
  clock_ = clock != nullptr ? clock : &real_clock;
  if (!config_.sigv4_region.empty()) {
    aws_ = std::make_shared<objstore::AwsCredentialCache>(
        config_.sigv4_region, "tessera-scaler", config_.getenv_fn, config_.sigv4_role_arn);
  }
  if (config_.cloud_identity.has_value()) {
    cloud_ = std::make_shared<CloudTokenCache>(*config_.cloud_identity, config_.cloud_scope,
                                               config_.getenv_fn);
  }
}

std::string PromClient::CloudCredentialsField() const {
  if (aws_ != nullptr) return "prometheus.sigv4";
  if (cloud_ == nullptr) return "";
  return *config_.cloud_identity == CloudIdentity::kGoogle ? "prometheus.googleWorkloadIdentity"
                                                           : "prometheus.azureWorkloadIdentity";
}

absl::StatusOr<PromClient::CloudCredentials> PromClient::CurrentCloudCredentials() const {
  const absl::Time now = clock_->Now();
  if (aws_ != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(objstore::AwsCredentials creds, aws_->Get(now));
    if (creds.anonymous()) return absl::InvalidArgumentError(NoAwsCredentials());
    return CloudCredentials{creds.source, creds.expiration};
  }
  if (cloud_ != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(AccessToken token, cloud_->Get(now));
    return CloudCredentials{token.source, token.expiration};
  }
  return absl::FailedPreconditionError("no cloud credentials in the config");
}

absl::StatusOr<HttpResponse> PromClient::Get(const std::string& path, const std::string& params,
                                             int timeout_ms,
                                             const std::atomic<bool>* cancel) const {
  HttpRequest req;
  req.url = absl::StrCat(config_.url, path, "?", params);
  req.timeout_ms = timeout_ms;
  req.cancel = cancel;
  req.headers = {"Accept: application/json"};
  req.headers.insert(req.headers.end(), config_.headers.begin(), config_.headers.end());
  req.tls = config_.tls;
  if (!config_.bearer_token_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::string token, Secret("bearer token", config_.bearer_token_file));
    req.headers.push_back("Authorization: Bearer " + token);
  } else if (!config_.basic_username.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::string password,
                             Secret("basic-auth password", config_.basic_password_file));
    req.headers.push_back("Authorization: Basic " +
                          absl::Base64Escape(config_.basic_username + ":" + password));
  } else if (aws_ != nullptr) {
    // Errors name where the credentials were looked for, never a key.
    const absl::Time now = clock_->Now();
    absl::StatusOr<objstore::AwsCredentials> creds = aws_->Get(now);
    if (!creds.ok()) {
      return absl::UnavailableError(
          absl::StrCat("prometheus.sigv4: AWS credentials: ", creds.status().message()));
    }
    if (creds->anonymous()) {
      return absl::UnavailableError(absl::StrCat("prometheus.sigv4: ", NoAwsCredentials()));
    }
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> signature,
                             objstore::SignV4("GET", req.url, {}, objstore::kEmptySha256, *creds,
                                              config_.sigv4_region, "aps", now));
    req.headers.insert(req.headers.end(), signature.begin(), signature.end());
  } else if (cloud_ != nullptr) {
    absl::StatusOr<AccessToken> token = cloud_->Get(clock_->Now());
    if (!token.ok()) {
      return absl::UnavailableError(
          absl::StrCat(CloudCredentialsField(), ": ", token.status().message()));
    }
    req.headers.push_back("Authorization: Bearer " + token->token);
  }
  absl::StatusOr<HttpResponse> r = Fetch(req);
  // Expired or revoked credentials: ask for new ones next time rather than wait for their expiry.
  if (r.ok() && (r->status == 401 || r->status == 403)) {
    if (aws_ != nullptr) aws_->Invalidate();
    if (cloud_ != nullptr) cloud_->Invalidate();
  }
  if (!r.ok()) {
    // A transport failure is the same for every query: name the endpoint, not the escaped query,
    // so that one unreachable Prometheus reads as one problem (the scaler logs each once).
    const std::string endpoint = absl::StrCat(config_.url, path);
    return absl::Status(r.status().code(),
                        absl::StrReplaceAll(r.status().message(), {{req.url, endpoint}}));
  }
  return r;
}

namespace {

// A time as Prometheus' API takes it: Unix seconds with the milliseconds it keeps.
std::string PromTime(absl::Time t) {
  return absl::StrFormat("%.3f", static_cast<double>(absl::ToUnixMillis(t)) / 1e3);
}

}  // namespace

absl::StatusOr<PromValue> PromClient::Query(const std::string& promql,
                                            std::optional<absl::Time> at) const {
  if (at.has_value() && (*at == absl::InfinitePast() || *at == absl::InfiniteFuture())) {
    return absl::InvalidArgumentError("Prometheus query: expected a finite evaluation time");
  }
  std::string params = absl::StrCat("query=", UrlEscape(promql));
  if (at.has_value()) absl::StrAppend(&params, "&time=", PromTime(*at));
  TESSERA_ASSIGN_OR_RETURN(HttpResponse r, Get("/api/v1/query", params, config_.timeout_ms));
  return ParsePromResponse(r.status, r.body);
}

absl::StatusOr<PromSeries> PromClient::QueryRange(const std::string& promql, absl::Time start,
                                                  absl::Duration step, int64_t count,
                                                  const std::atomic<bool>* cancel) const {
  if (step < absl::Milliseconds(1) || count < 0 || start == absl::InfinitePast() ||
      start == absl::InfiniteFuture()) {
    return absl::InvalidArgumentError(
        "Prometheus range query: expected a step of at least 1ms and a finite start");
  }
  // Prometheus keeps to milliseconds: the start and step are asked for in them.
  step = absl::Floor(step, absl::Milliseconds(1));
  start = absl::FromUnixMillis(absl::ToUnixMillis(start));
  PromSeries series{start, step, {}};
  series.points.reserve(static_cast<size_t>(count));
  for (int64_t done = 0; done < count;) {
    if (cancel != nullptr && cancel->load()) {
      return absl::CancelledError("Prometheus range query: cancelled");
    }
    const int64_t n = std::min<int64_t>(kMaxRangePoints, count - done);
    const absl::Time from = start + done * step;
    TESSERA_ASSIGN_OR_RETURN(
        HttpResponse r, Get("/api/v1/query_range",
                            absl::StrCat("query=", UrlEscape(promql), "&start=", PromTime(from),
                                         "&end=", PromTime(from + (n - 1) * step), "&step=",
                                         absl::StrFormat("%.3f", absl::ToDoubleSeconds(step))),
                            config_.range_timeout_ms, cancel));
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::optional<double>> part,
                             ParsePromRangeResponse(r.status, r.body, from, step, n));
    series.points.insert(series.points.end(), part.begin(), part.end());
    done += n;
  }
  return series;
}

}  // namespace tessera::adapters
