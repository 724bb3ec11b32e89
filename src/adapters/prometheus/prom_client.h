// PromQL instant queries over Prometheus' HTTP API (GET /api/v1/query), for the autoscaler's
// signals. Every outcome is explicit:
//   a number                      -> value, present
//   an empty vector               -> empty (no series matched: e.g. no pod is up to report)
//   NaN or +-Inf                  -> Unavailable "not a number"
//   several series                -> InvalidArgument (aggregate the query with sum/avg)
//   Prometheus error body         -> InvalidArgument for bad_data (the query is wrong),
//                                    Unavailable otherwise (timeout, execution, unavailable)
//   HTTP error without that body  -> Unavailable with the status
//   no answer within the timeout  -> DeadlineExceeded
//   connection refused etc.       -> Unavailable
//   a credential file unreadable  -> Unavailable naming the file (never its contents)
//
// Range queries (GET /api/v1/query_range), for the history a restarted scaler rebuilds: the same
// outcomes, but a step without a sample is absent (where the instant query would have found no
// series) and NaN or +-Inf is kept as such (where it would have failed). A range is asked for
// in requests of at most kMaxRangePoints steps (Prometheus refuses more than 11,000 per series).
//
// Credentials for a Prometheus behind authentication (OpenShift's Thanos querier, Grafana
// Mimir/Cortex, a reverse proxy): a bearer token from a file read before every query (a
// projected service-account token rotates), or basic auth with the password in a file; extra
// headers (e.g. Mimir's tenant header X-Scope-OrgID); TLS with a private CA or a client
// certificate. For the clouds' managed Prometheus services, credentials from the pod's cloud
// identity, kept until shortly before they expire: for Amazon Managed Service for Prometheus,
// every request signed with AWS Signature Version 4 (service "aps") with the credentials the
// environment gives (keys, a profile, IRSA or EKS Pod Identity;
// objstore::AwsCredentialsFromEnvironment); for Google Cloud's and Azure Monitor's, a bearer
// token from GKE Workload Identity or Microsoft Entra Workload ID (CloudTokenCache). A 401 or 403
// answer drops what is kept, so the next query asks for new credentials.
//
// Example:
//   PromClient prom({.url = "http://127.0.0.1:9090", .timeout_ms = 2000});
//   absl::StatusOr<PromValue> v = prom.Query("sum(vllm:num_requests_waiting)");
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "adapters/net/cloud_tokens.h"
#include "adapters/net/http_client.h"
#include "base/clock.h"

namespace tessera::adapters {
namespace objstore {
class AwsCredentialCache;
}

struct PromConfig {
  std::string url;  // http(s)://host:port[/prefix]
  int timeout_ms = 2000;
  int range_timeout_ms = 30000;   // per range-query request
  std::string bearer_token_file;  // optional: read before every query
  std::string basic_username;     // optional: basic auth, with the password in a file
  std::string basic_password_file;
  std::vector<std::string> headers;  // extra "Name: value" lines
  TlsOptions tls;
  // Sign every request with SigV4 for Amazon Managed Service for Prometheus in this region; ""
  // = off. Credentials come from the environment, read through `getenv_fn` (nullptr: the
  // process's; tests give their own).
  std::string sigv4_region;
  // With sigv4_region: query as this IAM role (STS AssumeRole with the environment's
  // credentials), e.g. one of the account that holds the workspace; "" = as the environment's.
  std::string sigv4_role_arn;
  // Send a bearer token from the pod's cloud identity (CloudTokenCache); nullopt = off. Azure
  // asks for `cloud_scope`.
  std::optional<CloudIdentity> cloud_identity;
  std::string cloud_scope = kAzurePrometheusScope;
  const char* (*getenv_fn)(const char*) = nullptr;  // for all of the above
};

struct PromValue {
  double value = 0;
  bool empty = false;                         // the query matched no series
  absl::Time sampled = absl::InfinitePast();  // the sample's timestamp
};

// A range query's one series, at start, start + step, ... (points.size() steps): each a value,
// or nullopt where Prometheus had no sample.
struct PromSeries {
  absl::Time start;
  absl::Duration step;
  std::vector<std::optional<double>> points;
};

class PromClient {
 public:
  static constexpr int64_t kMaxRangePoints = 10000;

  // `clock` (nullptr: the wall clock) dates SigV4 signatures and the credentials' expiry; it
  // must outlive the client.
  explicit PromClient(PromConfig config, const Clock* clock = nullptr);
  const PromConfig& config() const { return config_; }
  // Evaluated at `at` (Prometheus' `time` parameter, kept to milliseconds), or at Prometheus'
  // own now when not given: two scalers asking for the same time get the same answer.
  absl::StatusOr<PromValue> Query(const std::string& promql,
                                  std::optional<absl::Time> at = std::nullopt) const;
  // `count` steps from `start` (both kept to milliseconds, as Prometheus does). Once *cancel is
  // set, a request in flight stops within about a second (Cancelled) and no further one is sent.
  absl::StatusOr<PromSeries> QueryRange(const std::string& promql, absl::Time start,
                                        absl::Duration step, int64_t count,
                                        const std::atomic<bool>* cancel = nullptr) const;

  // With sigv4 or a workload identity, the config field that asks for cloud credentials
  // ("prometheus.sigv4", "prometheus.googleWorkloadIdentity", "prometheus.azureWorkloadIdentity");
  // "" otherwise.
  std::string CloudCredentialsField() const;
  // Where the cloud credentials the next query is sent with came from (never a key), and until
  // when (InfiniteFuture: read again at every query). Through the queries' own cache, so asking
  // at start costs no second fetch. InvalidArgument or NotFound for what the environment lacks
  // or names wrongly (no AWS credentials at all among them); Unavailable or PermissionDenied when
  // an identity endpoint does not answer or refuses. FailedPrecondition without cloud
  // credentials in the config.
  struct CloudCredentials {
    std::string source;
    absl::Time expiration;
  };
  absl::StatusOr<CloudCredentials> CurrentCloudCredentials() const;

 private:
  // GET config.url + path + "?" + params, with the credentials and headers of the config.
  absl::StatusOr<HttpResponse> Get(const std::string& path, const std::string& params,
                                   int timeout_ms, const std::atomic<bool>* cancel = nullptr) const;

  PromConfig config_;
  const Clock* clock_;
  // With sigv4_region or cloud_identity; shared by copies of this client.
  std::shared_ptr<objstore::AwsCredentialCache> aws_;
  std::shared_ptr<CloudTokenCache> cloud_;
};

// Parses a /api/v1/query response body (exposed for tests).
absl::StatusOr<PromValue> ParsePromResponse(long http_status, const std::string& body);
// Parses a /api/v1/query_range response body asked for `count` steps from `start` (exposed for
// tests).
absl::StatusOr<std::vector<std::optional<double>>> ParsePromRangeResponse(long http_status,
                                                                          const std::string& body,
                                                                          absl::Time start,
                                                                          absl::Duration step,
                                                                          int64_t count);

}  // namespace tessera::adapters
