// One blocking HTTP(S) request over libcurl, for Tessera's thin clients (Kubernetes API,
// Prometheus). Each thread keeps one curl handle, so its requests to a server reuse the
// connection (and TLS session) the last one left open. TLS material comes as files or PEM blobs;
// nothing here logs, and errors carry the method and URL without headers (so no credential ever
// appears in one).
//
// Example:
//   HttpRequest req{.method = "GET", .url = "http://127.0.0.1:9090/api/v1/query?query=up"};
//   absl::StatusOr<HttpResponse> r = Fetch(req);
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::adapters {

struct TlsOptions {
  std::string ca_file;
  std::string ca_pem;
  std::string client_cert_file;
  std::string client_cert_pem;
  std::string client_key_file;
  std::string client_key_pem;
  bool insecure_skip_verify = false;
  // https only: the name to verify the server's certificate for and to send in SNI, instead of
  // the URL's host, which is still what the connection goes to and what the Host header names
  // (a kubeconfig's tls-server-name: an API server reached by an address its certificate does
  // not hold). "" = the URL's host.
  std::string server_name;
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::string body;
  std::vector<std::string> headers;  // "Name: value"
  int timeout_ms = 10000;
  std::string unix_socket;  // connect to this Unix socket instead of the URL's host
  // The proxy to go through for every host, NO_PROXY notwithstanding (http://, https:// or
  // socks5://HOST:PORT, which is sent the host's name to resolve, as client-go's is; an https://
  // one is verified with `tls`, as client-go's; a kubeconfig's proxy-url, which client-go uses
  // for every request);
  // "" = the environment's (http_proxy, HTTPS_PROXY, NO_PROXY, which libcurl reads itself).
  std::string proxy;
  TlsOptions tls;
  // A larger response body is an error (ResourceExhausted), whether or not it announces its
  // length: an endpoint that is not what the config says (a file server, a proxy's error page
  // streaming) must not fill the memory. A page of 500 pods is a few MB.
  size_t max_response_bytes = size_t{64} << 20;
  // Streaming (a Kubernetes watch): when set, a 2xx body is handed over piece by piece as it
  // arrives instead of being collected (max_response_bytes does not apply; the callee bounds
  // what it keeps), and the response's body stays empty. Returning false stops the transfer
  // (Cancelled). The body of any other status is collected as usual.
  std::function<bool(absl::string_view)> on_data;
  // Checked about once a second while the request runs; true stops it (Cancelled). Lets a
  // shutdown end a long poll without waiting for its timeout.
  const std::atomic<bool>* cancel = nullptr;
  int connect_timeout_ms = 0;  // 0: timeout_ms
};

struct HttpResponse {
  long status = 0;
  std::string body;
};

// Transport failures are Unavailable (DeadlineExceeded for a timeout, ResourceExhausted for a body
// beyond max_response_bytes, Cancelled when on_data or cancel stopped it); any HTTP status is a
// response.
absl::StatusOr<HttpResponse> Fetch(const HttpRequest& request);

// Percent-encodes a path segment or query value (RFC 3986: unreserved characters kept, the rest
// %XX with upper-case hex, which is also SigV4's canonical form); `keep_slash` keeps '/' for a
// whole path.
std::string UrlEscape(const std::string& text, bool keep_slash = false);

// Decodes %XX escapes (and '+' as a space when `plus_is_space`, as in form-encoded queries);
// InvalidArgument for a truncated or non-hex escape.
absl::StatusOr<std::string> UrlUnescape(absl::string_view text, bool plus_is_space = false);

}  // namespace tessera::adapters
