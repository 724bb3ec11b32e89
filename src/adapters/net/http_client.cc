#include "adapters/net/http_client.h"

#include <curl/curl.h>

#include <memory>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tessera::adapters {
namespace {

struct Sink {
  std::string body;
  size_t max = 0;
  bool over = false;
  CURL* handle = nullptr;
  const std::function<bool(absl::string_view)>* on_data = nullptr;  // null: collect
  bool stopped = false;                                             // on_data returned false
};

size_t Append(char* data, size_t size, size_t n, void* out) {
  auto* sink = static_cast<Sink*>(out);
  if (sink->on_data != nullptr) {
    long status = 0;  // known once the headers are in, before any body
    curl_easy_getinfo(sink->handle, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300) {
      if (!(*sink->on_data)(absl::string_view(data, size * n))) {
        sink->stopped = true;
        return 0;  // curl stops with CURLE_WRITE_ERROR
      }
      return size * n;
    }
  }
  if (size * n > sink->max - sink->body.size()) {
    sink->over = true;
    return 0;  // curl stops with CURLE_WRITE_ERROR
  }
  sink->body.append(data, size * n);
  return size * n;
}

// The calling thread's easy handle, reset to defaults. curl keeps its connection and TLS session
// caches with the handle, so a thread's requests to one server reuse a connection: a scaler
// poll makes one TCP (and TLS) handshake per worker thread, not one per query. A reset handle
// forgets every option, so each request sets all of its own.
CURL* ThreadHandle() {
  thread_local std::unique_ptr<CURL, void (*)(CURL*)> handle(curl_easy_init(), curl_easy_cleanup);
  if (handle != nullptr) curl_easy_reset(handle.get());
  return handle.get();
}

int Progress(void* cancel, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(cancel)->load() ? 1 : 0;  // 1: abort
}

curl_blob Blob(const std::string& s) {
  return curl_blob{const_cast<char*>(s.data()), s.size(), CURL_BLOB_NOCOPY};
}

// TlsOptions::server_name over https: the URL with its host replaced by the name (so that curl
// sends it in SNI and verifies the certificate for it), the CONNECT_TO entry that still sends
// the connection to the URL's own host and port, and the Host header that names them.
struct ServerNameRoute {
  std::string url;
  std::string connect_to;
  std::string host_header;
};

absl::StatusOr<ServerNameRoute> RouteByServerName(const std::string& url, std::string name) {
  std::unique_ptr<CURLU, void (*)(CURLU*)> u(curl_url(), curl_url_cleanup);
  if (u == nullptr || curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) {
    return absl::InvalidArgumentError(absl::StrCat(url, ": not a URL"));
  }
  auto part = [&](CURLUPart what, unsigned flags) -> std::string {
    char* value = nullptr;
    if (curl_url_get(u.get(), what, &value, flags) != CURLUE_OK) return "";
    std::string out = value;
    curl_free(value);
    return out;
  };
  const std::string host = part(CURLUPART_HOST, 0), port = part(CURLUPART_PORT, 0);
  const std::string effective_port = part(CURLUPART_PORT, CURLU_DEFAULT_PORT);
  if (name.find(':') != std::string::npos && name.front() != '[') {
    name = absl::StrCat("[", name, "]");  // an IPv6 address
  }
  if (curl_url_set(u.get(), CURLUPART_HOST, name.c_str(), 0) != CURLUE_OK) {
    return absl::InvalidArgumentError(
        absl::StrCat(url, ": TLS server name \"", name, "\" is not a host name"));
  }
  ServerNameRoute r;
  r.url = part(CURLUPART_URL, 0);
  r.connect_to = absl::StrCat(name, ":", effective_port, ":", host, ":", effective_port);
  r.host_header = absl::StrCat("Host: ", host, port.empty() ? "" : ":", port);
  return r;
}

}  // namespace

std::string UrlEscape(const std::string& text, bool keep_slash) {
  std::string out;
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      constexpr char kHex[] = "0123456789ABCDEF";
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

absl::StatusOr<std::string> UrlUnescape(absl::string_view s, bool plus_is_space) {
  auto hex = [](char c) {
    return absl::ascii_isdigit(c) ? c - '0' : absl::ascii_tolower(c) - 'a' + 10;
  };
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size() || !absl::ascii_isxdigit(s[i + 1]) || !absl::ascii_isxdigit(s[i + 2])) {
        return absl::InvalidArgumentError("bad percent escape (expected %XX)");
      }
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else {
      out.push_back(plus_is_space && s[i] == '+' ? ' ' : s[i]);
    }
  }
  return out;
}

namespace {

// The libcurl options that set up one TLS connection: the server's, or an https:// proxy's.
struct TlsCurlOptions {
  CURLoption ca_file, ca_blob, verify_peer, verify_host, cert_file, key_file, cert_blob, cert_type,
      key_blob, key_type;
};
constexpr TlsCurlOptions kServerTls{
    CURLOPT_CAINFO,      CURLOPT_CAINFO_BLOB, CURLOPT_SSL_VERIFYPEER, CURLOPT_SSL_VERIFYHOST,
    CURLOPT_SSLCERT,     CURLOPT_SSLKEY,      CURLOPT_SSLCERT_BLOB,   CURLOPT_SSLCERTTYPE,
    CURLOPT_SSLKEY_BLOB, CURLOPT_SSLKEYTYPE};
constexpr TlsCurlOptions kProxyTls{CURLOPT_PROXY_CAINFO,         CURLOPT_PROXY_CAINFO_BLOB,
                                   CURLOPT_PROXY_SSL_VERIFYPEER, CURLOPT_PROXY_SSL_VERIFYHOST,
                                   CURLOPT_PROXY_SSLCERT,        CURLOPT_PROXY_SSLKEY,
                                   CURLOPT_PROXY_SSLCERT_BLOB,   CURLOPT_PROXY_SSLCERTTYPE,
                                   CURLOPT_PROXY_SSLKEY_BLOB,    CURLOPT_PROXY_SSLKEYTYPE};

// Sets `tls` on `h` through the options `o`. libcurl copies the strings and the curl_blob
// structs; the PEM data they point to (CURL_BLOB_NOCOPY) is read from `tls` during the transfer,
// so `tls` must outlive it.
void SetTls(CURL* h, const TlsOptions& tls, const TlsCurlOptions& o) {
  curl_blob ca = Blob(tls.ca_pem), cert = Blob(tls.client_cert_pem), key = Blob(tls.client_key_pem);
  if (!tls.ca_file.empty()) curl_easy_setopt(h, o.ca_file, tls.ca_file.c_str());
  if (!tls.ca_pem.empty()) curl_easy_setopt(h, o.ca_blob, &ca);
  if (tls.insecure_skip_verify) {
    curl_easy_setopt(h, o.verify_peer, 0L);
    curl_easy_setopt(h, o.verify_host, 0L);
  }
  if (!tls.client_cert_file.empty()) curl_easy_setopt(h, o.cert_file, tls.client_cert_file.c_str());
  if (!tls.client_key_file.empty()) curl_easy_setopt(h, o.key_file, tls.client_key_file.c_str());
  if (!tls.client_cert_pem.empty()) {
    curl_easy_setopt(h, o.cert_blob, &cert);
    curl_easy_setopt(h, o.cert_type, "PEM");
  }
  if (!tls.client_key_pem.empty()) {
    curl_easy_setopt(h, o.key_blob, &key);
    curl_easy_setopt(h, o.key_type, "PEM");
  }
}

}  // namespace

absl::StatusOr<HttpResponse> Fetch(const HttpRequest& req) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  CURL* h = ThreadHandle();
  if (h == nullptr) {
    return absl::InternalError("curl_easy_init failed");
  }
  Sink response{.body = {},
                .max = req.max_response_bytes,
                .over = false,
                .handle = h,
                .on_data = req.on_data ? &req.on_data : nullptr};
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> headers(nullptr, curl_slist_free_all);
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> connect_to(nullptr, curl_slist_free_all);
  ServerNameRoute route;
  if (!req.tls.server_name.empty() && absl::StartsWithIgnoreCase(req.url, "https://")) {
    TESSERA_ASSIGN_OR_RETURN(route, RouteByServerName(req.url, req.tls.server_name));
    connect_to.reset(curl_slist_append(nullptr, route.connect_to.c_str()));
    curl_easy_setopt(h, CURLOPT_CONNECT_TO, connect_to.get());
    headers.reset(curl_slist_append(nullptr, route.host_header.c_str()));
  }
  curl_easy_setopt(h, CURLOPT_URL, route.url.empty() ? req.url.c_str() : route.url.c_str());
  if (!req.unix_socket.empty()) {
    curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, req.unix_socket.c_str());
  }
  // A SOCKS5 proxy is sent the host's name, for the proxy to resolve (client-go's socks5 dialer
  // does so; libcurl's socks5:// would resolve it here, where a name behind a bastion such as
  // `ssh -D` does not resolve): libcurl's socks5h://.
  const std::string proxy = absl::StartsWithIgnoreCase(req.proxy, "socks5://")
                                ? absl::StrCat("socks5h://", req.proxy.substr(9))
                                : req.proxy;
  if (!proxy.empty()) {
    curl_easy_setopt(h, CURLOPT_PROXY, proxy.c_str());
    curl_easy_setopt(h, CURLOPT_NOPROXY, "");  // every host, whatever NO_PROXY says
  }
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(req.timeout_ms));
  curl_easy_setopt(
      h, CURLOPT_CONNECTTIMEOUT_MS,
      static_cast<long>(req.connect_timeout_ms > 0 ? req.connect_timeout_ms : req.timeout_ms));
  if (req.cancel != nullptr) {
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, Progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(req.cancel));
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  }
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, Append);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &response);
  if (!req.body.empty() || req.method == "POST" || req.method == "PATCH" || req.method == "PUT") {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(req.body.size()));
  }
  for (const std::string& line : req.headers) {
    headers.reset(curl_slist_append(headers.release(), line.c_str()));
  }
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  SetTls(h, req.tls, kServerTls);
  if (absl::StartsWithIgnoreCase(proxy, "https://")) {
    // client-go's transport makes the TLS connection to an https:// proxy with the cluster's TLS
    // settings (Go's http.Transport uses its TLSClientConfig for the proxy too): the proxy is
    // verified against the kubeconfig's CA, or not at all with insecure-skip-tls-verify, and is
    // shown the client certificate. libcurl keeps separate settings for the proxy (by default
    // the system's CAs): the same ones, here.
    SetTls(h, req.tls, kProxyTls);
  }
  CURLcode rc = curl_easy_perform(h);
  if (response.over) {
    return absl::ResourceExhaustedError(absl::StrCat(
        req.method, " ", req.url, ": response larger than ", req.max_response_bytes, " bytes"));
  }
  if (response.stopped || rc == CURLE_ABORTED_BY_CALLBACK) {
    return absl::CancelledError(absl::StrCat(req.method, " ", req.url, ": stopped"));
  }
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return absl::DeadlineExceededError(
        absl::StrCat(req.method, " ", req.url, ": timed out after ", req.timeout_ms, " ms"));
  }
  if (rc != CURLE_OK) {
    return absl::UnavailableError(
        absl::StrCat(req.method, " ", req.url, ": ", curl_easy_strerror(rc)));
  }
  HttpResponse r;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
  r.body = std::move(response.body);
  return r;
}

}  // namespace tessera::adapters
