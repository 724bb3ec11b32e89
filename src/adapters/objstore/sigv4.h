// AWS Signature Version 4 (header auth) for S3 requests and other AWS services (Amazon Managed
// Service for Prometheus, "aps", for the scaler), AWS credentials from the standard environment
// (AwsCredentialsFromEnvironment, kept until they expire by AwsCredentialCache), and S3
// addressing from it (AWS_REGION / AWS_DEFAULT_REGION, AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3,
// AWS_S3_FORCE_PATH_STYLE). Nothing here logs; errors never carry a secret.
//
// Example:
//   std::vector<std::string> h = SignV4("GET", url, {{"range", "bytes=0-9"}}, kEmptySha256,
//                                       creds, "us-east-1", "s3", now);
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "adapters/net/cloud_tokens.h"

namespace tessera::adapters::objstore {

inline constexpr char kEmptySha256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // "" unless temporary credentials
  // When temporary credentials (STS, a container credentials endpoint) stop being valid, as
  // their answer says; InfiniteFuture for keys from the environment or a file, and for an answer
  // that gives none.
  absl::Time expiration = absl::InfiniteFuture();
  // Where they came from, for `tessera scaler --check` (never a key): "AWS_ACCESS_KEY_ID",
  // "the shared credentials file PATH, profile NAME", "IRSA: role ARN through STS at URL",
  // "the container credentials endpoint (EKS Pod Identity, ECS)"; "" when anonymous.
  std::string source;
  bool anonymous() const { return access_key_id.empty(); }
};

// The headers to send ("Name: value"): Authorization, x-amz-date, x-amz-content-sha256 and
// x-amz-security-token when there is a session token. `signed_extra` are further headers the
// request carries and the signature must cover (names lower-case), e.g. range. `url` must be
// absolute; its host (and port) is signed as `host`. The path is signed as AWS's services other
// than S3 expect, its escapes encoded once more (`/a%20b` as `/a%2520b`); S3's once.
absl::StatusOr<std::vector<std::string>> SignV4(
    const std::string& method, const std::string& url,
    const std::vector<std::pair<std::string, std::string>>& signed_extra,
    const std::string& payload_sha256, const AwsCredentials& credentials, const std::string& region,
    const std::string& service, absl::Time now);

// The canonical request of SigV4 step 1 (exposed for tests and error reports); `s3` encodes the
// path once, as S3 wants, else twice, as every other service does.
absl::StatusOr<std::string> CanonicalRequest(
    const std::string& method, const std::string& url,
    const std::vector<std::pair<std::string, std::string>>& headers,
    const std::string& payload_sha256, std::string* signed_headers, bool s3 = true);

// An S3 source: s3://BUCKET/PREFIX and how to reach it.
struct S3Location {
  std::string bucket;
  std::string prefix;    // "" or ends with '/' unless it names one object
  std::string endpoint;  // scheme://host[:port], no trailing '/'
  bool path_style = false;
  std::string region = "us-east-1";
  AwsCredentials credentials;
  std::string ca_file;  // AWS_CA_BUNDLE

  // URL of `key` (unescaped) in the bucket, or of the bucket itself with `key` empty.
  std::string ObjectUrl(const std::string& key) const;
};

// The credentials of `profile` in an AWS shared credentials file (INI: `[name]` sections,
// `aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`; `#`/`;` comments). `path`
// names the file in errors, which never quote a value. NotFound when the profile is absent.
absl::StatusOr<AwsCredentials> ParseSharedCredentials(const std::string& text,
                                                      const std::string& path,
                                                      const std::string& profile);

// The body of a container credentials endpoint (ECS task roles, EKS Pod Identity):
// {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"} (RFC 3339), or {"code", "message"} on
// error.
absl::StatusOr<AwsCredentials> ParseContainerCredentials(const std::string& body);

// The credentials in an STS answer to `action` (AssumeRoleWithWebIdentity, AssumeRole):
// <Credentials> with <AccessKeyId>, <SecretAccessKey>, <SessionToken>, <Expiration>, or the
// <Error>'s code and message.
absl::StatusOr<AwsCredentials> ParseStsCredentials(const std::string& action,
                                                   const std::string& xml);
inline absl::StatusOr<AwsCredentials> ParseAssumeRoleWithWebIdentity(const std::string& xml) {
  return ParseStsCredentials("AssumeRoleWithWebIdentity", xml);
}

// Where AwsCredentialsFromEnvironment looks, for a message saying it found nothing.
inline constexpr char kAwsCredentialSources[] =
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a shared credentials file (AWS_PROFILE), IRSA "
    "(AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE) or EKS Pod Identity "
    "(AWS_CONTAINER_CREDENTIALS_FULL_URI)";

// The credentials the environment gives, read through `getenv_fn` (nullptr: the process's),
// in the AWS SDKs' order: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN; else the
// profile AWS_PROFILE (default "default") of the shared credentials file
// AWS_SHARED_CREDENTIALS_FILE (default $HOME/.aws/credentials; a missing default file or default
// profile is skipped, a missing named file or profile is an error); else, with
// AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN (IRSA), STS AssumeRoleWithWebIdentity at
// AWS_ENDPOINT_URL_STS or https://sts.REGION.amazonaws.com (session name AWS_ROLE_SESSION_NAME,
// default `session_name`); else, when AWS_CONTAINER_CREDENTIALS_FULL_URI (https, loopback or the
// ECS / EKS Pod Identity agent addresses) or AWS_CONTAINER_CREDENTIALS_RELATIVE_URI is set, a GET
// of that endpoint with the Authorization header from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE or
// AWS_CONTAINER_AUTHORIZATION_TOKEN (EKS Pod Identity sets these); else none (anonymous()).
// Errors: InvalidArgument or NotFound for what the environment names wrongly (a file that cannot
// be read, a profile not in it, half of a key pair, an endpoint not allowed), Unavailable when an
// endpoint does not answer, PermissionDenied when it refuses.
absl::StatusOr<AwsCredentials> AwsCredentialsFromEnvironment(
    const std::string& region, const std::string& session_name,
    const char* (*getenv_fn)(const char*) = nullptr);

// STS AssumeRole: an hour's credentials of `role_arn` (session `session_name`), asked for with
// `base` (the request signed with SigV4 for "sts" in `region`) at AWS_ENDPOINT_URL_STS or
// https://sts.REGION.amazonaws.com: for a role in another account, such as one that may query
// a central Amazon Managed Service for Prometheus workspace. Their `source` names the role, the
// endpoint and base's source. Errors: Unavailable when STS does not answer, PermissionDenied
// with its error code and message when it refuses (the base identity may not assume the role,
// or the role does not trust it).
absl::StatusOr<AwsCredentials> AssumeRole(const AwsCredentials& base, const std::string& role_arn,
                                          const std::string& region,
                                          const std::string& session_name, absl::Time now,
                                          const char* (*getenv_fn)(const char*) = nullptr);

// AwsCredentialsFromEnvironment for a client that signs often (the scaler's queries, several a
// second): credentials with an expiry (STS's, a container endpoint's) are kept until RefreshTime
// (adapters/net/cloud_tokens.h: 5 minutes before it, or halfway there), so the endpoints are
// asked about once an hour rather than once a query; everything else (keys from the environment or
// a file) is read again at each Get, so rotated keys apply at once. When asking again fails while
// the kept credentials are still valid, those are used. With `role_arn`, what Get returns are
// that role's credentials (AssumeRole), asked for with the environment's when they are due.
// Thread-safe; one request to an endpoint at a time.
class AwsCredentialCache {
 public:
  AwsCredentialCache(std::string region, std::string session_name,
                     const char* (*getenv_fn)(const char*) = nullptr, std::string role_arn = "")
      : region_(std::move(region)),
        session_name_(std::move(session_name)),
        getenv_fn_(getenv_fn),
        role_arn_(std::move(role_arn)) {}
  AwsCredentialCache(const AwsCredentialCache&) = delete;
  AwsCredentialCache& operator=(const AwsCredentialCache&) = delete;

  absl::StatusOr<AwsCredentials> Get(absl::Time now) {
    return kept_.Get(now, [&] { return Fetch(now); });
  }
  // Forgets kept credentials (a service answered that they expired or were revoked).
  void Invalidate() { kept_.Invalidate(); }

 private:
  absl::StatusOr<AwsCredentials> Fetch(absl::Time now) const;

  const std::string region_;
  const std::string session_name_;
  const char* (*const getenv_fn_)(const char*);
  const std::string role_arn_;
  KeptCredentials<AwsCredentials> kept_;
};

// Parses s3://BUCKET/PREFIX and reads the environment via `getenv_fn` (injectable for tests):
// the region, endpoint and addressing above, and AwsCredentialsFromEnvironment's credentials
// (session name "tessera-node-agent"), read at each call, so rotated credentials are picked up
// by the next fetch.
absl::StatusOr<S3Location> ParseS3Source(const std::string& source,
                                         const char* (*getenv_fn)(const char*) = nullptr);

}  // namespace tessera::adapters::objstore
