#include "adapters/net/tls_files.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "adapters/io/files.h"
#include "adapters/io/test_scratch_dir.h"
#include "adapters/net/test_certs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;

// `parts` concatenated into a new file under the test's temporary directory.
std::string Join(const std::string& name, std::initializer_list<std::string> parts) {
  static const std::string dir = testing::NewScratchDir("tls-files");
  std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (const std::string& p : parts) out << p;
  return path;
}

// What TlsFiles::Load says of these files.
absl::Status LoadStatus(const std::string& cert, const std::string& key,
                        const std::string& ca = "") {
  return TlsFiles::Load(cert, key, ca).status();
}

TEST(TlsFiles, CertificateAndItsKey) {
  testing::TestCerts pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  EXPECT_TRUE(LoadStatus(pki.server_cert(), pki.server_key()).ok());
  // A chain: the leaf first, then the CA.
  const std::string chain = Join("chain.crt", {*ReadFile(pki.server_cert()), *ReadFile(pki.ca())});
  EXPECT_TRUE(LoadStatus(chain, pki.server_key()).ok());
}

TEST(TlsFiles, WhatIsWrongAndWhere) {
  testing::TestCerts pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  absl::Status s = LoadStatus(pki.server_cert(), pki.client_key());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(pki.client_key() +
                                     ": the private key is not the one of the certificate in " +
                                     pki.server_cert()));
  // The CA first: its key is not the leaf's.
  const std::string ca_first =
      Join("ca-first.crt", {*ReadFile(pki.ca()), *ReadFile(pki.server_cert())});
  EXPECT_THAT(LoadStatus(ca_first, pki.server_key()).message(),
              HasSubstr("is not the one of the certificate"));
  EXPECT_THAT(LoadStatus(pki.server_key(), pki.server_key()).message(),
              HasSubstr(pki.server_key() + ": expected a PEM certificate chain"));
  EXPECT_THAT(LoadStatus(pki.server_cert(), pki.server_cert()).message(),
              HasSubstr(pki.server_cert() + ": expected an unencrypted PEM private key"));
  const std::string torn =
      Join("torn.crt", {*ReadFile(pki.server_cert()), "-----BEGIN CERTIFICATE-----\nAAAA\n"});
  EXPECT_THAT(LoadStatus(torn, pki.server_key()).message(),
              HasSubstr("found a block after the certificates that is not one"));
  s = LoadStatus("/nonexistent/tls.crt", pki.server_key());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/tls.crt"));
  // The key's contents never appear in a message.
  const std::string key = *ReadFile(pki.server_key());
  const std::string body = key.substr(key.find('\n') + 1, 40);
  EXPECT_THAT(LoadStatus(pki.server_cert(), pki.server_cert()).message(),
              ::testing::Not(HasSubstr(body)));
}

TEST(TlsFiles, EncryptedKeyIsRefusedWithoutAsking) {
  testing::TestCerts pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  const testing::ScratchDir dir("tls-files");
  const std::string encrypted = dir.path() + "/encrypted.key";
  const std::string command =
      absl::StrCat("openssl pkey -in '", pki.server_key(), "' -aes256 -passout pass:secret -out '",
                   encrypted, "' 2>/dev/null");
  ASSERT_EQ(std::system(command.c_str()), 0);
  EXPECT_THAT(LoadStatus(pki.server_cert(), encrypted).message(),
              HasSubstr(encrypted + ": expected an unencrypted PEM private key"));
}

TEST(TlsFiles, CertificateNotAfterAsOpensslReadsIt) {
  testing::TestCerts pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  // openssl prints e.g. "notAfter=Dec  7 23:14:00 2026 GMT".
  const testing::ScratchDir dir("tls-files");
  const std::string out = dir.path() + "/enddate.txt";
  const std::string command =
      absl::StrCat("openssl x509 -noout -enddate -in '", pki.server_cert(), "' > '", out, "'");
  ASSERT_EQ(std::system(command.c_str()), 0);
  absl::StatusOr<std::string> line = ReadFile(out);
  ASSERT_TRUE(line.ok());
  absl::Time expected;
  std::string error;
  ASSERT_TRUE(absl::ParseTime("notAfter=%b %e %H:%M:%S %Y GMT",
                              std::string(absl::StripTrailingAsciiWhitespace(*line)),
                              absl::UTCTimeZone(), &expected, &error))
      << *line << error;
  absl::StatusOr<absl::Time> not_after = CertificateNotAfter(*ReadFile(pki.server_cert()));
  ASSERT_TRUE(not_after.ok()) << not_after.status();
  EXPECT_EQ(*not_after, expected);
  EXPECT_FALSE(CertificateNotAfter(*ReadFile(pki.server_key())).ok());
}

TEST(TlsFiles, CaBundle) {
  testing::TestCerts pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  EXPECT_TRUE(LoadStatus(pki.server_cert(), pki.server_key(), pki.ca()).ok());
  const std::string two = Join("two.crt", {*ReadFile(pki.ca()), *ReadFile(pki.other_ca())});
  EXPECT_TRUE(LoadStatus(pki.server_cert(), pki.server_key(), two).ok());
  EXPECT_THAT(LoadStatus(pki.server_cert(), pki.server_key(), pki.server_key()).message(),
              HasSubstr(pki.server_key() + ": expected PEM CA certificates"));
  EXPECT_THAT(LoadStatus(pki.server_cert(), pki.server_key(), Join("empty.crt", {})).message(),
              HasSubstr("found none"));
  const std::string torn =
      Join("torn-ca.crt", {*ReadFile(pki.ca()), "-----BEGIN CERTIFICATE-----\nAAAA\n"});
  EXPECT_THAT(LoadStatus(pki.server_cert(), pki.server_key(), torn).message(),
              HasSubstr("found a block that is not one"));
}

}  // namespace
}  // namespace tessera::adapters
