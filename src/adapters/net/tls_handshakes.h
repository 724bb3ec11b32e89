// What a TLS server's handshakes came to, for its metrics: how many completed, and how many
// failed on a fatal alert, by the side that sent it and the alert. A client that does not trust
// the server's certificate sends one (Go's crypto/tls, as the API server uses it: "bad
// certificate"; OpenSSL's clients, curl among them: "unknown CA"), so this is where a webhook
// whose caBundle no longer matches its certificate shows: the API server's calls never reach an
// HTTP handler. Counted from OpenSSL's info callback on the server's SSL_CTX, so it works
// beneath any server built on OpenSSL (cpp-httplib's SSLServer here).
//
// Example:
//   TlsHandshakes handshakes;            // outlives the server's connections
//   handshakes.Watch(&ctx);              // in the SSLServer's SSL_CTX setup
//   AppendTlsHandshakeMetrics(&text, "tessera_webhook", &handshakes);
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"

namespace tessera::adapters {

class TlsHandshakes {
 public:
  // The refusals of a client that does not trust the certificate ("client", "bad_certificate":
  // Go's; "client", "unknown_ca": OpenSSL's) are counted from 0 at start rather than from their
  // first occurrence, so that Prometheus' increase() sees the first one.
  TlsHandshakes();
  TlsHandshakes(const TlsHandshakes&) = delete;
  TlsHandshakes& operator=(const TlsHandshakes&) = delete;

  // Has every connection of `ctx` report its handshake here (SSL_CTX_set_info_callback; any
  // info callback set before is replaced). This object must outlive the connections.
  void Watch(SSL_CTX* ctx);

  // The side that refused the handshake: "client" (the alert was received) or "server" (sent),
  // and the alert's name in lower case with underscores ("unknown_ca", "bad_certificate",
  // "handshake_failure", "protocol_version").
  using Refusal = std::pair<std::string, std::string>;
  struct Counts {
    int64_t completed = 0;
    std::map<Refusal, int64_t> failed;
  };
  Counts counts() const;  // Thread-safe.

  // For the info callback.
  void CountCompleted();
  void CountFailed(bool by_client, const char* alert);

 private:
  std::atomic<int64_t> completed_{0};
  mutable Mutex mu_;
  std::map<Refusal, int64_t> failed_ ABSL_GUARDED_BY(mu_);
};

// Appends to `out`, in Prometheus' text format, PREFIX_tls_handshakes_completed_total (a counter)
// and PREFIX_tls_handshake_failures_total{refused_by="client"|"server",alert="..."} (a counter,
// one sample for each refusal seen and for the two a client that does not trust the certificate
// sends, from 0). Both families are always declared; without `handshakes` (no TLS) the first is
// 0 and the second has no sample.
void AppendTlsHandshakeMetrics(std::string* out, const std::string& prefix,
                               const TlsHandshakes* handshakes);

}  // namespace tessera::adapters
