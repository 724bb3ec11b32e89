// One blocking HTTP(S) request over libcurl, for Tessera's thin clients (Kubernetes API,
// Prometheus). TLS material comes as files or PEM blobs; nothing here logs, and errors carry
// the method and URL without headers (so no credential ever appears in one).
//
// Example:
//   HttpRequest req{.method = "GET", .url = "http://127.0.0.1:9090/api/v1/query?query=up"};
//   absl::StatusOr<HttpResponse> r = Fetch(req);
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::adapters {

struct TlsOptions {
  std::string ca_file;
  std::string ca_pem;
  std::string client_cert_file;
  std::string client_cert_pem;
  std::string client_key_file;
  std::string client_key_pem;
  bool insecure_skip_verify = false;
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::string body;
  std::vector<std::string> headers;  // "Name: value"
  int timeout_ms = 10000;
  std::string unix_socket;  // connect to this Unix socket instead of the URL's host
  TlsOptions tls;
};

struct HttpResponse {
  long status = 0;
  std::string body;
};

// Transport failures are Unavailable (DeadlineExceeded for a timeout); any HTTP status is a
// response.
absl::StatusOr<HttpResponse> Fetch(const HttpRequest& request);

// Percent-encodes a path segment or query value.
std::string UrlEscape(const std::string& text);

}  // namespace tessera::adapters
