#include "adapters/net/tls_handshakes.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tessera::adapters {
namespace {

// The SSL_CTX's ex_data slot that holds its TlsHandshakes.
int Slot() {
  static const int slot = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return slot;
}

// OpenSSL's info callback. `ret` of an alert is its level (high byte) and description (low).
// Only fatal alerts between the client's hello and the end of the handshake count: a
// close_notify is a warning; an alert after the handshake ends a connection that was served; and
// before a hello was read there was no handshake to refuse (a TCP probe that connects and
// closes, or plain HTTP, which OpenSSL answers with a decode_error alert to the closed socket).
void OnInfo(const SSL* ssl, int where, int ret) {
  auto* handshakes = static_cast<TlsHandshakes*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), Slot()));
  if (handshakes == nullptr) return;
  if ((where & SSL_CB_HANDSHAKE_DONE) != 0) {
    handshakes->CountCompleted();
  } else if ((where & SSL_CB_ALERT) != 0 && (ret >> 8) == SSL3_AL_FATAL &&
             SSL_is_init_finished(ssl) == 0 && SSL_get_state(ssl) != TLS_ST_BEFORE) {
    handshakes->CountFailed((where & SSL_CB_READ) != 0, SSL_alert_desc_string_long(ret));
  }
}

}  // namespace

TlsHandshakes::TlsHandshakes() {
  MutexLock lock(&mu_);
  failed_[{"client", "bad_certificate"}] = 0;
  failed_[{"client", "unknown_ca"}] = 0;
}

void TlsHandshakes::Watch(SSL_CTX* ctx) {
  SSL_CTX_set_ex_data(ctx, Slot(), this);
  SSL_CTX_set_info_callback(ctx, OnInfo);
}

void TlsHandshakes::CountCompleted() { completed_.fetch_add(1, std::memory_order_relaxed); }

void TlsHandshakes::CountFailed(bool by_client, const char* alert) {
  // "unknown CA" -> "unknown_ca": a label value that reads as the others do.
  std::string name;
  for (const char* c = alert; c != nullptr && *c != '\0'; ++c) {
    name += absl::ascii_isalnum(*c) ? absl::ascii_tolower(*c) : '_';
  }
  if (name.empty()) name = "unknown";
  MutexLock lock(&mu_);
  ++failed_[{by_client ? "client" : "server", name}];
}

TlsHandshakes::Counts TlsHandshakes::counts() const {
  Counts c;
  c.completed = completed_.load(std::memory_order_relaxed);
  MutexLock lock(&mu_);
  c.failed = failed_;
  return c;
}

void AppendTlsHandshakeMetrics(std::string* out, const std::string& prefix,
                               const TlsHandshakes* handshakes) {
  const std::string completed = prefix + "_tls_handshakes_completed_total";
  const std::string failed = prefix + "_tls_handshake_failures_total";
  const TlsHandshakes::Counts counts =
      handshakes == nullptr ? TlsHandshakes::Counts{} : handshakes->counts();
  absl::StrAppend(out, "# HELP ", completed, " TLS handshakes completed.\n# TYPE ", completed,
                  " counter\n", completed, " ", counts.completed, "\n");
  absl::StrAppend(out, "# HELP ", failed,
                  " TLS handshakes that ended on a fatal alert, by the side that sent it "
                  "(refused_by=\"client\": the client refused the server, as one that does not "
                  "trust its certificate does) and the alert.\n# TYPE ",
                  failed, " counter\n");
  for (const auto& [refusal, n] : counts.failed) {
    absl::StrAppend(out, failed, "{refused_by=\"", refusal.first, "\",alert=\"", refusal.second,
                    "\"} ", n, "\n");
  }
}

}  // namespace tessera::adapters
