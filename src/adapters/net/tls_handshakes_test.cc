#include "adapters/net/tls_handshakes.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "adapters/net/httplib_serve.h"
#include "adapters/net/test_certs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A socket connected to 127.0.0.1:port; -1 when it cannot connect.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

// One TLS handshake with 127.0.0.1:port as a client that verifies the server against `ca`, as
// curl and the API server do (an untrusted certificate ends the handshake with an alert);
// `tls12_ciphers` non-empty: a TLS 1.2 client offering only those. True when it completes.
bool Handshake(int port, const std::string& ca, const std::string& tls12_ciphers = "") {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  bool ok = SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) == 1;
  if (!tls12_ciphers.empty()) {
    ok = ok && SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION) == 1 &&
         SSL_CTX_set_cipher_list(ctx, tls12_ciphers.c_str()) == 1;
  }
  const int fd = ok ? Connect(port) : -1;
  SSL* ssl = fd >= 0 ? SSL_new(ctx) : nullptr;
  ok = ssl != nullptr && SSL_set_fd(ssl, fd) == 1 && SSL_connect(ssl) == 1;
  if (ok) SSL_shutdown(ssl);
  SSL_free(ssl);
  if (fd >= 0) close(fd);
  SSL_CTX_free(ctx);
  ERR_clear_error();
  return ok;
}

// Waits (up to 10 s) until `done` holds: the server counts a handshake on its own thread, after
// the client has gone on.
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 1000 && !done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

TEST(TlsHandshakes, CountsCompletedHandshakesAndRefusalsBySideAndAlert) {
  testing::TestCerts pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  TlsHandshakes handshakes;
  httplib::SSLServer server(pki.server_cert().c_str(), pki.server_key().c_str());
  ASSERT_TRUE(server.is_valid());
  handshakes.Watch(server.ssl_context());
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  std::atomic<bool> stop{false};
  std::atomic<int> port{0};
  std::thread serving([&] { (void)ServeUntilStopped(server, "127.0.0.1", 0, &stop, &port); });
  while (port.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  using Refusal = TlsHandshakes::Refusal;
  auto failed = [&](const Refusal& r) {
    const auto counts = handshakes.counts();
    auto it = counts.failed.find(r);
    return it == counts.failed.end() ? int64_t{0} : it->second;
  };

  // A client that trusts the CA: completed, over a request too.
  EXPECT_TRUE(Handshake(port.load(), pki.ca()));
  {
    // Its connection ends when it goes: a served connection's close_notify is a warning.
    httplib::SSLClient client("127.0.0.1", port.load());
    client.set_ca_cert_path(pki.ca().c_str());
    client.enable_server_certificate_verification(true);
    httplib::Result r = client.Get("/healthz");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
  }
  EXPECT_TRUE(Eventually([&] { return handshakes.counts().completed == 2; }))
      << handshakes.counts().completed;

  // One that does not trust it: it refuses with "unknown CA", as a webhook's client does when the
  // caBundle it was given is not the CA of the certificate served.
  EXPECT_FALSE(Handshake(port.load(), pki.other_ca()));
  EXPECT_TRUE(Eventually([&] { return failed({"client", "unknown_ca"}) == 1; }));
  EXPECT_FALSE(Handshake(port.load(), pki.other_ca()));
  EXPECT_TRUE(Eventually([&] { return failed({"client", "unknown_ca"}) == 2; }));

  // One the server refuses: a TLS 1.2 client offering only ECDSA suites to an RSA certificate.
  EXPECT_FALSE(Handshake(port.load(), pki.ca(), "ECDHE-ECDSA-AES128-GCM-SHA256"));
  EXPECT_TRUE(Eventually([&] { return failed({"server", "handshake_failure"}) == 1; }));

  // A connection closed before any handshake (a TCP probe) is neither, nor is plain HTTP.
  const int fd = Connect(port.load());
  ASSERT_GE(fd, 0);
  close(fd);
  httplib::Client plain("127.0.0.1", port.load());
  plain.set_read_timeout(2, 0);
  httplib::Result p = plain.Get("/healthz");
  EXPECT_TRUE(!p || p->status != 200);
  EXPECT_TRUE(Handshake(port.load(), pki.ca()));  // after both, in order on the server's queue
  EXPECT_TRUE(Eventually([&] { return handshakes.counts().completed == 3; }));
  stop.store(true);
  serving.join();
  const TlsHandshakes::Counts counts = handshakes.counts();
  EXPECT_EQ(counts.completed, 3);
  EXPECT_EQ(counts.failed.size(), 3u);

  std::string text;
  AppendTlsHandshakeMetrics(&text, "tessera_webhook", &handshakes);
  EXPECT_THAT(text, HasSubstr("# TYPE tessera_webhook_tls_handshakes_completed_total counter\n"
                              "tessera_webhook_tls_handshakes_completed_total 3\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE tessera_webhook_tls_handshake_failures_total counter\n"));
  EXPECT_THAT(text, HasSubstr("tessera_webhook_tls_handshake_failures_total{refused_by=\"client\","
                              "alert=\"unknown_ca\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("tessera_webhook_tls_handshake_failures_total{refused_by=\"server\","
                              "alert=\"handshake_failure\"} 1\n"));
  // Go's refusal (the API server's), not seen here, from 0.
  EXPECT_THAT(text, HasSubstr("tessera_webhook_tls_handshake_failures_total{refused_by=\"client\","
                              "alert=\"bad_certificate\"} 0\n"));
}

TEST(TlsHandshakes, MetricsWithoutTlsDeclareBothFamilies) {
  std::string text;
  AppendTlsHandshakeMetrics(&text, "tessera_x", nullptr);
  EXPECT_THAT(text, HasSubstr("tessera_x_tls_handshakes_completed_total 0\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE tessera_x_tls_handshake_failures_total counter\n"));
  EXPECT_THAT(text, Not(HasSubstr("tessera_x_tls_handshake_failures_total{")));
  // With TLS, before any handshake: the untrusted-certificate refusals from 0.
  TlsHandshakes none;
  text.clear();
  AppendTlsHandshakeMetrics(&text, "tessera_x", &none);
  EXPECT_THAT(text, HasSubstr("tessera_x_tls_handshake_failures_total{refused_by=\"client\","
                              "alert=\"bad_certificate\"} 0\n"
                              "tessera_x_tls_handshake_failures_total{refused_by=\"client\","
                              "alert=\"unknown_ca\"} 0\n"));
}

}  // namespace
}  // namespace tessera::adapters
