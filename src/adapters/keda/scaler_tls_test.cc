// `tessera scaler` with TLS (the ScalerConfig's `tls`): served over loopback with certificates
// made by the openssl command line, and spoken to the way KEDA does (its TriggerAuthentication's
// caCert, tlsClientCert and tlsClientKey): a client that trusts the CA and, where the config asks
// for one, shows a certificate the CA signed, gets answers; a plaintext client, one that trusts
// another CA, and one without a client certificate do not.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "adapters/io/files.h"
#include "adapters/keda/scaler.h"
#include "adapters/keda/test_scaler_server.h"
#include "adapters/net/test_certs.h"
#include "externalscaler.grpc.pb.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

class FixedSource final : public MetricSource {
 public:
  absl::StatusOr<PromValue> Query(const std::string&) override {
    PromValue v;
    v.value = 0;
    v.sampled = absl::Now();
    return v;
  }
};

// The scaler on a free loopback port for the lifetime of the object.
class TlsScaler {
 public:
  TlsScaler(const std::string& cert, const std::string& key, const std::string& client_ca) {
    std::string text =
        absl::StrCat(R"(apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus: {url: "http://127.0.0.1:9", pollInterval: 100ms}
tls: {certFile: ")",
                     cert, R"(", keyFile: ")", key, R"(")",
                     client_ca.empty() ? "" : ", clientCAFile: \"" + client_ca + "\"",
                     R"(}
services:
  - {name: chat, queueQuery: q, readyQuery: r}
)");
    absl::StatusOr<ScalerConfig> config = DecodeScalerConfig("scaler.yaml", text);
    EXPECT_TRUE(config.ok()) << config.status();
    if (!config.ok()) return;
    scaler_ = std::make_unique<Scaler>(*config, source_, clock_);
    served_ = std::make_unique<testing::ServedScaler>(*scaler_);
  }
  int port() const { return served_ ? served_->port() : 0; }

 private:
  FixedSource source_;
  RealClock clock_;
  std::unique_ptr<Scaler> scaler_;
  std::unique_ptr<testing::ServedScaler> served_;  // declared last: stops first
};

// GetMetricSpec over a channel with `creds`; the server's name checked as "localhost".
grpc::Status Spec(int port, const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  auto stub = externalscaler::ExternalScaler::NewStub(
      grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), creds, args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  externalscaler::GetMetricSpecResponse out;
  grpc::Status s = stub->GetMetricSpec(&ctx, testing::ScaledObjectRefFor("chat"), &out);
  if (s.ok()) {
    EXPECT_EQ(out.metricspecs_size(), 1);
    EXPECT_EQ(out.metricspecs(0).metricname(), "tessera-chat");
  }
  return s;
}

std::shared_ptr<grpc::ChannelCredentials> Tls(const std::string& ca, const std::string& cert = "",
                                              const std::string& key = "") {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = *ReadFile(ca);
  if (!cert.empty()) {
    o.pem_cert_chain = *ReadFile(cert);
    o.pem_private_key = *ReadFile(key);
  }
  return grpc::SslCredentials(o);
}

TEST(ScalerTls, ServerCertificateOnly) {
  testing::TestCerts pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  TlsScaler scaler(pki.server_cert(), pki.server_key(), "");
  ASSERT_GT(scaler.port(), 0);
  grpc::Status s = Spec(scaler.port(), Tls(pki.ca()));
  EXPECT_TRUE(s.ok()) << s.error_message();
  // Trusting another CA: the handshake fails; plaintext: no answer either.
  EXPECT_EQ(Spec(scaler.port(), Tls(pki.other_ca())).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Spec(scaler.port(), grpc::InsecureChannelCredentials()).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST(ScalerTls, ClientCertificatesRequiredWithAClientCA) {
  testing::TestCerts pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  TlsScaler scaler(pki.server_cert(), pki.server_key(), pki.ca());
  ASSERT_GT(scaler.port(), 0);
  grpc::Status s = Spec(scaler.port(), Tls(pki.ca(), pki.client_cert(), pki.client_key()));
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(Spec(scaler.port(), Tls(pki.ca())).error_code(), grpc::StatusCode::UNAVAILABLE);
  // A client certificate from another PKI, which the client CA did not sign.
  testing::TestCerts stranger;
  ASSERT_TRUE(stranger.ok()) << stranger.error();
  EXPECT_EQ(Spec(scaler.port(), Tls(pki.ca(), stranger.client_cert(), stranger.client_key()))
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST(ScalerTls, UnreadableKeyMaterialFailsToServe) {
  absl::StatusOr<ScalerConfig> config =
      DecodeScalerConfig("scaler.yaml", R"(apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus: {url: "http://127.0.0.1:9"}
tls: {certFile: /nonexistent/tls.crt, keyFile: /nonexistent/tls.key}
services:
  - {name: chat, queueQuery: q, readyQuery: r}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  FixedSource source;
  RealClock clock;
  Scaler scaler(*config, source, clock);
  std::atomic<bool> stop{false};
  absl::Status s = ServeScaler(scaler, "127.0.0.1:0", &stop, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/tls.crt"), std::string::npos) << s;
}

}  // namespace
}  // namespace tessera::adapters
