// ServerTls::Reload's outcomes on files changed the ways a mounted Secret changes (the serving
// side is in scaler_tls_test.cc).
#include "adapters/keda/server_tls.h"

#include <filesystem>
#include <string>

#include "adapters/io/test_scratch_dir.h"
#include "adapters/net/test_certs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST(ServerTls, ReportsEachChangeOnceAndKeepsTheLastGoodFiles) {
  testing::TestCerts pki;
  testing::TestCerts next;
  ASSERT_TRUE(pki.ok()) << pki.error();
  ASSERT_TRUE(next.ok()) << next.error();
  const testing::ScratchDir scratch("server-tls");
  const std::string& dir = scratch.path();
  const std::string cert = dir + "/tls.crt", key = dir + "/tls.key", ca = dir + "/ca.crt";
  auto put = [](const std::string& from, const std::string& to) {
    fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  };
  put(pki.server_cert(), cert);
  put(pki.server_key(), key);
  put(pki.ca(), ca);
  absl::StatusOr<std::unique_ptr<ServerTls>> tls = ServerTls::Create(cert, key, ca);
  ASSERT_TRUE(tls.ok()) << tls.status();
  ASSERT_NE((*tls)->credentials(), nullptr);
  EXPECT_EQ((*tls)->Reload().outcome, ServerTls::Outcome::kSame);

  // Half a renewal: the new certificate beside the old key.
  put(next.server_cert(), cert);
  ServerTls::Reloaded r = (*tls)->Reload();
  EXPECT_EQ(r.outcome, ServerTls::Outcome::kRefused);
  EXPECT_THAT(r.message, HasSubstr("the certificate served so far stays in use"));
  EXPECT_THAT(r.message,
              HasSubstr(key + ": the private key is not the one of the certificate in " + cert));
  EXPECT_EQ((*tls)->Reload().outcome, ServerTls::Outcome::kSame);  // reported once
  // A file gone is another change, reported once too.
  fs::remove(key);
  r = (*tls)->Reload();
  EXPECT_EQ(r.outcome, ServerTls::Outcome::kRefused);
  EXPECT_THAT(r.message, HasSubstr(key));
  EXPECT_EQ((*tls)->Reload().outcome, ServerTls::Outcome::kSame);
  // The renewal completed.
  put(next.server_key(), key);
  r = (*tls)->Reload();
  EXPECT_EQ(r.outcome, ServerTls::Outcome::kRenewed);
  EXPECT_THAT(r.message, HasSubstr("serving the renewed " + cert + " and trusting " + ca));
  EXPECT_EQ((*tls)->Reload().outcome, ServerTls::Outcome::kSame);
  // Only the client CA renewed; then a CA file that is not one.
  put(next.ca(), ca);
  EXPECT_EQ((*tls)->Reload().outcome, ServerTls::Outcome::kRenewed);
  put(next.server_key(), ca);
  r = (*tls)->Reload();
  EXPECT_EQ(r.outcome, ServerTls::Outcome::kRefused);
  EXPECT_THAT(r.message, HasSubstr(ca + ": expected PEM CA certificates"));
  // Back to what is served: nothing to report, and a later breakage is reported again.
  put(next.ca(), ca);
  EXPECT_EQ((*tls)->Reload().outcome, ServerTls::Outcome::kSame);
  put(next.server_key(), ca);
  EXPECT_EQ((*tls)->Reload().outcome, ServerTls::Outcome::kRefused);
}

TEST(ServerTls, CreateRefusesWhatDoesNotLoad) {
  testing::TestCerts pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  absl::StatusOr<std::unique_ptr<ServerTls>> tls =
      ServerTls::Create(pki.server_cert(), pki.client_key(), "");
  ASSERT_FALSE(tls.ok());
  EXPECT_THAT(tls.status().message(), HasSubstr("is not the one of the certificate"));
  tls = ServerTls::Create(pki.server_cert(), pki.server_key(), "/nonexistent/ca.crt");
  ASSERT_FALSE(tls.ok());
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(ServerTls::Create(pki.server_cert(), pki.server_key(), "").ok());
}

}  // namespace
}  // namespace tessera::adapters
