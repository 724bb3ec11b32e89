// `tessera scaler` with TLS (the ScalerConfig's `tls`): served over loopback with certificates
// made by the openssl command line, and spoken to the way KEDA does (its TriggerAuthentication's
// caCert, tlsClientCert and tlsClientKey): a client that trusts the CA and, where the config asks
// for one, shows a certificate the CA signed, gets answers; a plaintext client, one that trusts
// another CA, and one without a client certificate do not. A certificate and client CA renewed
// on disk the way the kubelet updates a mounted Secret are served without a restart.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "adapters/io/files.h"
#include "adapters/io/test_scratch_dir.h"
#include "adapters/keda/scaler.h"
#include "adapters/keda/test_scaler_server.h"
#include "adapters/net/test_certs.h"
#include "adapters/net/tls_files.h"
#include "base/mutex.h"
#include "externalscaler.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;

class FixedSource final : public MetricSource {
 public:
  absl::StatusOr<PromValue> Query(const std::string&, absl::Time) override {
    PromValue v;
    v.value = 0;
    v.sampled = absl::Now();
    return v;
  }
};

// The scaler on a free loopback port for the lifetime of the object.
class TlsScaler {
 public:
  TlsScaler(const std::string& cert, const std::string& key, const std::string& client_ca,
            const std::string& reload_interval = "") {
    std::string text =
        absl::StrCat(R"(apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus: {url: "http://127.0.0.1:9", pollInterval: 100ms}
tls: {certFile: ")",
                     cert, R"(", keyFile: ")", key, R"(")",
                     client_ca.empty() ? "" : ", clientCAFile: \"" + client_ca + "\"",
                     reload_interval.empty() ? "" : ", reloadInterval: " + reload_interval,
                     R"(}
services:
  - {name: chat, queueQuery: q, readyQuery: r}
)");
    absl::StatusOr<ScalerConfig> config = DecodeScalerConfig("scaler.yaml", text);
    EXPECT_TRUE(config.ok()) << config.status();
    if (!config.ok()) return;
    scaler_ = std::make_unique<Scaler>(*config, source_, clock_, [this](const std::string& line) {
      MutexLock lock(&log_mu_);
      absl::StrAppend(&log_, line, "\n");
    });
    served_ = std::make_unique<testing::ServedScaler>(*scaler_);
  }
  int port() const { return served_ ? served_->port() : 0; }
  std::string metrics() const { return scaler_ ? scaler_->MetricsText() : ""; }
  std::string log() const {
    MutexLock lock(&log_mu_);
    return log_;
  }

 private:
  mutable Mutex log_mu_;
  std::string log_ ABSL_GUARDED_BY(log_mu_);
  FixedSource source_;
  RealClock clock_;
  std::unique_ptr<Scaler> scaler_;
  std::unique_ptr<testing::ServedScaler> served_;  // declared last: stops first
};

// GetMetricSpec over a new connection with `creds`; the server's name checked as "localhost".
grpc::Status Spec(int port, const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  // Its own connection: channels alike would otherwise share one already made (the handshake
  // under test would not happen).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
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

// A Secret volume as the kubelet writes it: the files are links through `..data`, a link to a
// timestamped directory, and an update writes a new directory and swaps `..data` in one rename,
// so a reader sees all old files or all new ones.
class SecretVolume {
 public:
  // Publishes {name in the volume, source file}; false when a step fails.
  bool Update(const std::vector<std::pair<std::string, std::string>>& files) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const std::string& dir = scratch_.path();
    const std::string version = absl::StrCat("..version-", ++versions_);
    fs::create_directory(dir + "/" + version, ec);
    for (const auto& [name, source] : files) {
      const std::string link = absl::StrCat(dir, "/", name);
      if (!ec) fs::copy_file(source, absl::StrCat(dir, "/", version, "/", name), ec);
      if (!ec && !fs::is_symlink(link)) fs::create_symlink(absl::StrCat("..data/", name), link, ec);
    }
    if (!ec) fs::create_symlink(version, dir + "/..data_tmp", ec);
    if (!ec) fs::rename(dir + "/..data_tmp", dir + "/..data", ec);
    return !ec;
  }
  std::string path(const std::string& name) const { return scratch_.path() + "/" + name; }

 private:
  testing::ScratchDir scratch_{"secret"};
  int versions_ = 0;
};

// Whether a new connection gets an answer within `within`, trying every 100 ms.
bool AnsweredWithin(int port, const std::shared_ptr<grpc::ChannelCredentials>& creds,
                    absl::Duration within) {
  const auto until = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(within);
  do {
    if (Spec(port, creds).ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

TEST(ScalerTls, RenewedCertificateAndClientCaServedWithoutRestart) {
  testing::TestCerts before;
  testing::TestCerts after;  // a new CA, server and client certificate: a full rotation
  ASSERT_TRUE(before.ok()) << before.error();
  ASSERT_TRUE(after.ok()) << after.error();
  SecretVolume secret;
  ASSERT_TRUE(secret.Update({{"tls.crt", before.server_cert()},
                             {"tls.key", before.server_key()},
                             {"ca.crt", before.ca()}}));
  TlsScaler scaler(secret.path("tls.crt"), secret.path("tls.key"), secret.path("ca.crt"), "1s");
  ASSERT_GT(scaler.port(), 0);
  const auto old_client = Tls(before.ca(), before.client_cert(), before.client_key());
  const auto new_client = Tls(after.ca(), after.client_cert(), after.client_key());
  grpc::Status s = Spec(scaler.port(), old_client);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(Spec(scaler.port(), new_client).ok());
  // A connection made before the renewal, as KEDA keeps one.
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  auto kept = externalscaler::ExternalScaler::NewStub(
      grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", scaler.port()), old_client, args));
  auto ask = [&kept] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    externalscaler::GetMetricSpecResponse out;
    return kept->GetMetricSpec(&ctx, testing::ScaledObjectRefFor("chat"), &out);
  };
  s = ask();
  EXPECT_TRUE(s.ok()) << s.error_message();

  ASSERT_TRUE(secret.Update(
      {{"tls.crt", after.server_cert()}, {"tls.key", after.server_key()}, {"ca.crt", after.ca()}}));
  // Read again within the 1 s interval (plus the handshakes' own time).
  EXPECT_TRUE(AnsweredWithin(scaler.port(), new_client, absl::Seconds(10)));
  // The old server certificate is no longer served, and the old CA's clients are refused.
  EXPECT_FALSE(Spec(scaler.port(), old_client).ok());
  EXPECT_FALSE(
      Spec(scaler.port(), Tls(after.ca(), before.client_cert(), before.client_key())).ok());
  // The connection made before is not dropped: the renewal applies to new handshakes.
  s = ask();
  EXPECT_TRUE(s.ok()) << s.error_message();
  // Logged, and shown to Prometheus with the new certificate's expiry.
  EXPECT_THAT(scaler.log(), HasSubstr("TLS: serving the renewed " + secret.path("tls.crt") +
                                      " and trusting " + secret.path("ca.crt")));
  const std::string metrics = scaler.metrics();
  EXPECT_THAT(metrics, HasSubstr("tessera_scaler_tls_reloads_total{outcome=\"renewed\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("tessera_scaler_tls_reloads_total{outcome=\"refused\"} 0\n"));
  absl::StatusOr<std::string> pem = ReadFile(after.server_cert());
  ASSERT_TRUE(pem.ok());
  absl::StatusOr<absl::Time> expiry = CertificateNotAfter(*pem);
  ASSERT_TRUE(expiry.ok()) << expiry.status();
  EXPECT_THAT(metrics, HasSubstr(absl::StrCat("tessera_scaler_tls_certificate_expiry_timestamp_"
                                              "seconds ",
                                              absl::ToUnixSeconds(*expiry), "\n")));
}

TEST(ScalerTls, RenewalThatDoesNotLoadKeepsTheLastGoodCertificate) {
  testing::TestCerts pki;
  testing::TestCerts next;
  ASSERT_TRUE(pki.ok()) << pki.error();
  ASSERT_TRUE(next.ok()) << next.error();
  SecretVolume secret;
  ASSERT_TRUE(secret.Update({{"tls.crt", pki.server_cert()}, {"tls.key", pki.server_key()}}));
  TlsScaler scaler(secret.path("tls.crt"), secret.path("tls.key"), "", "1s");
  ASSERT_GT(scaler.port(), 0);
  const auto client = Tls(pki.ca());
  grpc::Status s = Spec(scaler.port(), client);
  EXPECT_TRUE(s.ok()) << s.error_message();
  // A broken update: the certificate's file holds a key, and the key's a certificate.
  ASSERT_TRUE(secret.Update({{"tls.crt", pki.server_key()}, {"tls.key", pki.server_cert()}}));
  // Every new connection is still answered with the last good certificate through two reloads.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  while (std::chrono::steady_clock::now() < until) {
    s = Spec(scaler.port(), client);
    ASSERT_TRUE(s.ok()) << s.error_message();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_THAT(scaler.log(),
              HasSubstr("TLS: the files changed but do not load; the certificate "
                        "served so far stays in use: " +
                        secret.path("tls.crt") + ": expected a PEM certificate chain"));
  EXPECT_THAT(scaler.metrics(),
              HasSubstr("tessera_scaler_tls_reloads_total{outcome=\"refused\"} 1\n"));
  // A good one afterwards is served.
  ASSERT_TRUE(secret.Update({{"tls.crt", next.server_cert()}, {"tls.key", next.server_key()}}));
  EXPECT_TRUE(AnsweredWithin(scaler.port(), Tls(next.ca()), absl::Seconds(10)));
}

TEST(ScalerTls, ReloadIntervalIsFromASecondToADay) {
  for (const char* bad : {"0s", "500ms", "25h", "soon"}) {
    absl::StatusOr<ScalerConfig> config =
        DecodeScalerConfig("scaler.yaml", absl::StrCat(R"(apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus: {url: "http://127.0.0.1:9"}
tls: {certFile: a.crt, keyFile: a.key, reloadInterval: )",
                                                       bad, R"(}
services:
  - {name: chat, queueQuery: q, readyQuery: r}
)"));
    ASSERT_FALSE(config.ok()) << bad;
    EXPECT_NE(config.status().message().find("scaler.yaml:4:"), std::string::npos)
        << config.status();
    EXPECT_NE(config.status().message().find("tls.reloadInterval"), std::string::npos)
        << config.status();
  }
  absl::StatusOr<ScalerConfig> config =
      DecodeScalerConfig("scaler.yaml", R"(apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus: {url: "http://127.0.0.1:9"}
tls: {certFile: a.crt, keyFile: a.key}
services:
  - {name: chat, queueQuery: q, readyQuery: r}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->tls_reload_interval, absl::Minutes(1));
}

// What ServeScaler returns for a scaler with these files, asked to stop as soon as it serves.
absl::Status ServeOnce(const std::string& cert, const std::string& key, const std::string& ca) {
  absl::StatusOr<ScalerConfig> config = DecodeScalerConfig(
      "scaler.yaml",
      absl::StrCat("apiVersion: tessera.io/v1alpha1\nkind: ScalerConfig\n",
                   "prometheus: {url: \"http://127.0.0.1:9\"}\n", "tls: {certFile: \"", cert,
                   "\", keyFile: \"", key, "\"", ca.empty() ? "" : ", clientCAFile: \"" + ca + "\"",
                   "}\nservices:\n  - {name: chat, queueQuery: q, readyQuery: r}\n"));
  if (!config.ok()) return config.status();
  FixedSource source;
  RealClock clock;
  Scaler scaler(*config, source, clock);
  std::atomic<bool> stop{true};  // serve nothing if it did start
  return ServeScaler(scaler, "127.0.0.1:0", &stop, nullptr);
}

TEST(ScalerTls, KeyMaterialThatDoesNotLoadStopsItAtStart) {
  testing::TestCerts pki;
  testing::TestCerts other;
  ASSERT_TRUE(pki.ok()) << pki.error();
  ASSERT_TRUE(other.ok()) << other.error();
  absl::Status s = ServeOnce(pki.server_cert(), other.server_key(), "");
  EXPECT_NE(s.message().find("is not the one of the certificate in " + pki.server_cert()),
            std::string::npos)
      << s;
  s = ServeOnce(pki.server_key(), pki.server_key(), "");
  EXPECT_NE(s.message().find(pki.server_key() + ": expected a PEM certificate chain"),
            std::string::npos)
      << s;
  s = ServeOnce(pki.server_cert(), pki.server_key(), pki.server_key());
  EXPECT_NE(s.message().find(pki.server_key() + ": expected PEM CA certificates"),
            std::string::npos)
      << s;
  // The good files serve (and stop at once, as asked).
  s = ServeOnce(pki.server_cert(), pki.server_key(), pki.ca());
  EXPECT_TRUE(s.ok()) << s;
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
