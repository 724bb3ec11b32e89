// OAuth 2 access tokens for a pod's cloud identity, so that the scaler can query a managed
// Prometheus that takes a bearer token from the cloud's identity service rather than from a file:
//
//   kGoogle  Google Cloud Managed Service for Prometheus, with GKE Workload Identity (or a VM's
//            service account): GET http://HOST/computeMetadata/v1/instance/service-accounts/
//            default/token with `Metadata-Flavor: Google`, HOST being GCE_METADATA_HOST or
//            metadata.google.internal; the answer is {"access_token", "expires_in", "token_type"}.
//   kAzure   Azure Monitor managed service for Prometheus, with Microsoft Entra Workload ID (what
//            AKS's workload identity webhook injects): POST AUTHORITY TENANT/oauth2/v2.0/token,
//            AUTHORITY being AZURE_AUTHORITY_HOST or https://login.microsoftonline.com/, TENANT
//            AZURE_TENANT_ID, form client_id=AZURE_CLIENT_ID, scope, grant_type=client_credentials
//            and the service account token of AZURE_FEDERATED_TOKEN_FILE (read at each request, as
//            the kubelet rotates it) as a jwt-bearer client_assertion; the answer is
//            {"access_token", "expires_in", "token_type"}, or {"error", "error_description"}.
//
// CloudTokenCache keeps a token until shortly before it expires (RefreshTime). Errors name the
// endpoint and what it answered, never a token.
//
// Example:
//   CloudTokenCache tokens(CloudIdentity::kGoogle);
//   absl::StatusOr<std::string> t = tokens.Get(clock.Now());  // "Authorization: Bearer " + *t
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace tessera::adapters {

enum class CloudIdentity { kGoogle, kAzure };

// The scope asked for on Azure unless the config names another (Azure Monitor workspaces in the
// public cloud).
inline constexpr char kAzurePrometheusScope[] = "https://prometheus.monitor.azure.com/.default";

// When a credential fetched at `now` that expires at `expiration` should be fetched again:
// kRefreshBefore before its expiry, or halfway there when it was issued with less than twice
// that left (so an endpoint that hands out short-lived ones is not asked at every use).
inline constexpr absl::Duration kRefreshBefore = absl::Minutes(5);
absl::Time RefreshTime(absl::Time now, absl::Time expiration);

struct AccessToken {
  std::string token;
  absl::Time expiration;
  std::string source;  // the endpoint, for `tessera scaler --check`
};

// The environment as the credential chains here read it: through `getenv_fn` (tests give their
// own), or the process's when it is null; "" for a variable that is not set.
std::function<std::string(const char*)> EnvironmentReader(const char* (*getenv_fn)(const char*));

// The credential file an environment variable names (ReadSecretFile: whitespace around it
// dropped); InvalidArgument naming the variable and the path when it cannot be read or is empty,
// never quoting it. E.g. "AZURE_FEDERATED_TOKEN_FILE /var/run/x/token: no such file".
absl::StatusOr<std::string> ReadCredentialFile(const std::string& var, const std::string& path);

// An endpoint's answer: {"access_token", "expires_in", "token_type"} as both give it (expires_in
// in seconds from `now`, a number, or a string as Entra's v1 endpoint wrote it; token_type Bearer
// or absent), or for a status other than 200 PermissionDenied with the answer's "error" and the
// first line of its "error_description". `what` names the endpoint in errors (exposed for tests
// and the fuzzer).
absl::StatusOr<AccessToken> ParseCloudTokenAnswer(const std::string& what, long status,
                                                  const std::string& body, absl::Time now);

// One token from the identity's endpoint, dated from `now` (expires_in is relative). What the
// environment lacks (a variable, a readable token file) is InvalidArgument naming it; an
// endpoint that does not answer is Unavailable; one that refuses is PermissionDenied with its
// error and description.
absl::StatusOr<AccessToken> FetchCloudToken(CloudIdentity identity, const std::string& scope,
                                            absl::Time now,
                                            const char* (*getenv_fn)(const char*) = nullptr);

// What AwsCredentialCache and CloudTokenCache share: the credentials last fetched, kept until
// RefreshTime from their fetch; fetched again after that. Ones without an expiry (`expiration`
// InfiniteFuture) are fetched again at every Get (keys from a file, so rotated ones apply at
// once), or with `keep_unexpiring` kept until Invalidate (a kubeconfig exec plugin's). When
// fetching again fails while the kept ones are still valid, those serve. After a failed fetch
// the next is not tried for kRetryAfterFailure: until then Get answers at once, with the kept
// credentials while they are valid, else with that failure (an identity endpoint that does not
// answer would otherwise hold every query for its timeout, one after the other). Thread-safe; one
// fetch at a time. T has an `absl::Time expiration`.
inline constexpr absl::Duration kRetryAfterFailure = absl::Seconds(10);

template <typename T>
class KeptCredentials {
 public:
  explicit KeptCredentials(bool keep_unexpiring = false) : keep_unexpiring_(keep_unexpiring) {}

  absl::StatusOr<T> Get(absl::Time now, const std::function<absl::StatusOr<T>()>& fetch) {
    MutexLock lock(&mu_);
    if (kept_.has_value() && now < refresh_at_) return *kept_;
    // Within the hold after a failure (a clock set back ends it).
    if (!failure_.ok() && failed_at_ <= now && now < failed_at_ + kRetryAfterFailure) {
      if (kept_.has_value() && now < kept_->expiration) return *kept_;
      return failure_;
    }
    absl::StatusOr<T> fresh = fetch();
    if (!fresh.ok()) {
      failure_ = fresh.status();
      failed_at_ = now;
      if (kept_.has_value() && now < kept_->expiration) return *kept_;
      kept_.reset();
      return fresh.status();
    }
    failure_ = absl::OkStatus();
    if (fresh->expiration == absl::InfiniteFuture() && !keep_unexpiring_) {
      kept_.reset();
      return fresh;
    }
    kept_ = *fresh;
    refresh_at_ = RefreshTime(now, fresh->expiration);
    return fresh;
  }
  // Forgets what is kept (the service answered 401 or 403: expired or revoked).
  void Invalidate() {
    MutexLock lock(&mu_);
    kept_.reset();
  }

 private:
  const bool keep_unexpiring_;
  Mutex mu_;
  std::optional<T> kept_ ABSL_GUARDED_BY(mu_);
  absl::Time refresh_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Status failure_ ABSL_GUARDED_BY(mu_);  // the last fetch's, when it failed
  absl::Time failed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// FetchCloudToken, kept (KeptCredentials).
class CloudTokenCache {
 public:
  explicit CloudTokenCache(CloudIdentity identity, std::string scope = kAzurePrometheusScope,
                           const char* (*getenv_fn)(const char*) = nullptr)
      : identity_(identity), scope_(std::move(scope)), getenv_fn_(getenv_fn) {}
  CloudTokenCache(const CloudTokenCache&) = delete;
  CloudTokenCache& operator=(const CloudTokenCache&) = delete;

  absl::StatusOr<AccessToken> Get(absl::Time now) {
    return kept_.Get(now, [&] { return FetchCloudToken(identity_, scope_, now, getenv_fn_); });
  }
  void Invalidate() { kept_.Invalidate(); }

 private:
  const CloudIdentity identity_;
  const std::string scope_;
  const char* (*const getenv_fn_)(const char*);
  KeptCredentials<AccessToken> kept_;
};

}  // namespace tessera::adapters
