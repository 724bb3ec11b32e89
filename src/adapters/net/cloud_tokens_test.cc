// Cloud identity tokens against local stand-ins that answer as the GKE metadata server and
// Microsoft Entra ID's token endpoint document (and check what they are sent).
#include "adapters/net/cloud_tokens.h"

#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "adapters/io/test_scratch_dir.h"
#include "adapters/net/test_env.h"
#include "adapters/net/test_http_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const absl::Time kNow = absl::FromUnixSeconds(1796968000);  // 2026-12-11T05:46:40Z

TEST(CloudTokens, RefreshTimeIsFiveMinutesBeforeTheExpiryOrHalfwayThere) {
  EXPECT_EQ(RefreshTime(kNow, kNow + absl::Hours(1)), kNow + absl::Minutes(55));
  EXPECT_EQ(RefreshTime(kNow, kNow + absl::Minutes(6)), kNow + absl::Minutes(3));
  EXPECT_EQ(RefreshTime(kNow, kNow), kNow);  // already expired: at once
}

struct NumberedCredentials {
  int number = 0;
  absl::Time expiration;
};

TEST(KeptCredentials, AFailedFetchIsNotTriedAgainForTenSeconds) {
  KeptCredentials<NumberedCredentials> kept;
  int asked = 0;
  absl::Status down = absl::UnavailableError("the identity endpoint: timed out");
  bool failing = true;
  auto fetch = [&]() -> absl::StatusOr<NumberedCredentials> {
    ++asked;
    if (failing) return down;
    return NumberedCredentials{.number = asked, .expiration = kNow + absl::Hours(1)};
  };
  // Nothing kept and the endpoint down: its failure, then the same at once, without asking,
  // for the next ten seconds.
  EXPECT_EQ(kept.Get(kNow, fetch).status(), down);
  for (absl::Duration d = absl::Seconds(1); d < kRetryAfterFailure; d += absl::Seconds(1)) {
    ASSERT_EQ(kept.Get(kNow + d, fetch).status(), down);
  }
  EXPECT_EQ(asked, 1);
  failing = false;
  EXPECT_EQ(kept.Get(kNow + kRetryAfterFailure, fetch)->number, 2);
  // Due again 55 minutes later with the endpoint down: the kept ones serve, and the endpoint is
  // asked once per ten seconds, not at each of 60 queries a second apart.
  failing = true;
  const absl::Time due = kNow + absl::Minutes(55);
  for (absl::Duration d; d < absl::Minutes(1); d += absl::Seconds(1)) {
    ASSERT_EQ(kept.Get(due + d, fetch)->number, 2);
  }
  EXPECT_EQ(asked, 2 + 6);
  // Once they expire, the failure (held as well).
  EXPECT_EQ(kept.Get(kNow + absl::Hours(1), fetch).status(), down);
  EXPECT_EQ(kept.Get(kNow + absl::Hours(1) + absl::Seconds(1), fetch).status(), down);
  EXPECT_EQ(asked, 9);
  // A clock set back ends the hold rather than stretching it.
  failing = false;
  EXPECT_EQ(kept.Get(kNow + absl::Minutes(59), fetch)->number, 10);
}

TEST(CloudTokens, GoogleFromTheMetadataServerKeptUntilShortlyBeforeItExpires) {
  std::mutex mu;
  int asked = 0;
  std::string flavor;
  testing::LocalHttpServer metadata([&](httplib::Server& s) {
    s.Get("/computeMetadata/v1/instance/service-accounts/default/token",
          [&](const httplib::Request& req, httplib::Response& res) {
            std::lock_guard<std::mutex> l(mu);
            ++asked;
            flavor = req.get_header_value("Metadata-Flavor");
            if (flavor != "Google") {  // the metadata server's guard against proxied requests
              res.status = 403;
              return;
            }
            res.set_content(absl::StrCat(R"({"access_token":"ya29.token-)", asked,
                                         R"(","expires_in":3599,"token_type":"Bearer"})"),
                            "application/json");
          });
  });
  testing::FakeEnvironment() = {{"GCE_METADATA_HOST", absl::StrCat("127.0.0.1:", metadata.port())}};
  absl::StatusOr<AccessToken> t =
      FetchCloudToken(CloudIdentity::kGoogle, "", kNow, testing::FakeGetenv);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->token, "ya29.token-1");
  EXPECT_EQ(t->source, absl::StrCat("the GKE metadata server at 127.0.0.1:", metadata.port()));
  EXPECT_EQ(t->expiration, kNow + absl::Seconds(3599));
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(flavor, "Google");
  }

  CloudTokenCache cache(CloudIdentity::kGoogle, "", testing::FakeGetenv);
  EXPECT_EQ(cache.Get(kNow)->token, "ya29.token-2");
  for (absl::Duration d = absl::Seconds(5); d < absl::Seconds(3299); d += absl::Seconds(5)) {
    ASSERT_EQ(cache.Get(kNow + d)->token, "ya29.token-2");
  }
  EXPECT_EQ(cache.Get(kNow + absl::Seconds(3299))->token, "ya29.token-3");
  cache.Invalidate();
  EXPECT_EQ(cache.Get(kNow + absl::Seconds(3300))->token, "ya29.token-4");
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(asked, 4);
  }
  // Not a metadata server: no answer, said with where it was looked for.
  metadata.Stop();
  absl::Status gone =
      FetchCloudToken(CloudIdentity::kGoogle, "", kNow, testing::FakeGetenv).status();
  EXPECT_EQ(gone.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(gone.message(), HasSubstr("the GKE metadata server at 127.0.0.1:"));
  // The kept token still serves until it expires, then the failure shows.
  EXPECT_EQ(cache.Get(kNow + absl::Seconds(3300 + 3299))->token, "ya29.token-4");
  EXPECT_EQ(cache.Get(kNow + absl::Seconds(3300 + 3599)).status().code(),
            absl::StatusCode::kUnavailable);
  testing::FakeEnvironment().clear();
}

TEST(CloudTokens, AzureWorkloadIdentityExchangesTheServiceAccountToken) {
  std::mutex mu;
  httplib::Params form;
  std::string path;
  testing::LocalHttpServer entra([&](httplib::Server& s) {
    s.Post(R"(/[^/]+/oauth2/v2\.0/token)", [&](const httplib::Request& req,
                                               httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu);
      form = req.params;
      path = req.path;
      if (req.get_param_value("client_id") != "0a1b-client") {
        res.status = 400;
        res.set_content(
            R"({"error":"unauthorized_client","error_description":"AADSTS700016: Application with identifier 'x' was not found in the directory.\r\nTrace ID: 1f2e\r\nCorrelation ID: 3c4d"})",
            "application/json");
        return;
      }
      res.set_content(R"({"token_type":"Bearer","expires_in":3599,"ext_expires_in":3599,)"
                      R"("access_token":"eyJ0eXAi.entra"})",
                      "application/json");
    });
  });
  const testing::ScratchDir scratch("azure-wi");
  const std::string& dir = scratch.path();
  std::ofstream(dir + "/token") << "eyJ.sa.token-1\n";
  testing::FakeEnvironment() = {{"AZURE_TENANT_ID", "72f9-tenant"},
                                {"AZURE_CLIENT_ID", "0a1b-client"},
                                {"AZURE_FEDERATED_TOKEN_FILE", dir + "/token"},
                                {"AZURE_AUTHORITY_HOST", entra.url("/")}};
  absl::StatusOr<AccessToken> t =
      FetchCloudToken(CloudIdentity::kAzure, kAzurePrometheusScope, kNow, testing::FakeGetenv);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->token, "eyJ0eXAi.entra");
  EXPECT_EQ(t->source, "Microsoft Entra ID at " + entra.url("/"));
  EXPECT_EQ(t->expiration, kNow + absl::Seconds(3599));
  auto sent = [&](const char* key) {
    std::lock_guard<std::mutex> l(mu);
    auto it = form.find(key);
    return it == form.end() ? std::string("(none)") : it->second;
  };
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(path, "/72f9-tenant/oauth2/v2.0/token");
  }
  EXPECT_EQ(sent("client_id"), "0a1b-client");
  EXPECT_EQ(sent("scope"), "https://prometheus.monitor.azure.com/.default");
  EXPECT_EQ(sent("grant_type"), "client_credentials");
  EXPECT_EQ(sent("client_assertion_type"),
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
  EXPECT_EQ(sent("client_assertion"), "eyJ.sa.token-1");  // the file's newline is not sent
  // The kubelet rotates the file: the next request sends the new token.
  std::ofstream(dir + "/token") << "eyJ.sa.token-2";
  ASSERT_TRUE(
      FetchCloudToken(CloudIdentity::kAzure, "api://x/.default", kNow, testing::FakeGetenv).ok());
  EXPECT_EQ(sent("client_assertion"), "eyJ.sa.token-2");
  EXPECT_EQ(sent("scope"), "api://x/.default");
  // Refused: Entra's error and the first line of its description, not the trace ids nor the token.
  testing::FakeEnvironment()["AZURE_CLIENT_ID"] = "wrong";
  absl::Status refused =
      FetchCloudToken(CloudIdentity::kAzure, kAzurePrometheusScope, kNow, testing::FakeGetenv)
          .status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.message(),
              HasSubstr("HTTP 400 (unauthorized_client: AADSTS700016: Application with "
                        "identifier 'x' was not found in the directory.)"));
  EXPECT_THAT(refused.message(), Not(HasSubstr("Trace ID")));
  EXPECT_THAT(refused.message(), Not(HasSubstr("eyJ.sa")));
  // What the environment lacks is named.
  testing::FakeEnvironment().erase("AZURE_CLIENT_ID");
  absl::Status missing =
      FetchCloudToken(CloudIdentity::kAzure, kAzurePrometheusScope, kNow, testing::FakeGetenv)
          .status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.message(), HasSubstr("AZURE_CLIENT_ID"));
  testing::FakeEnvironment()["AZURE_CLIENT_ID"] = "0a1b-client";
  testing::FakeEnvironment()["AZURE_FEDERATED_TOKEN_FILE"] = dir + "/missing";
  EXPECT_THAT(
      FetchCloudToken(CloudIdentity::kAzure, kAzurePrometheusScope, kNow, testing::FakeGetenv)
          .status()
          .message(),
      HasSubstr("AZURE_FEDERATED_TOKEN_FILE " + dir + "/missing: no such file"));
  testing::FakeEnvironment().clear();
}

TEST(CloudTokens, AnswersWithoutABearerTokenOrItsLifetimeAreRefused) {
  std::mutex mu;
  std::string body;
  testing::LocalHttpServer metadata([&](httplib::Server& s) {
    s.Get(".*", [&](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu);
      res.set_content(body, "application/json");
    });
  });
  testing::FakeEnvironment() = {{"GCE_METADATA_HOST", absl::StrCat("127.0.0.1:", metadata.port())}};
  auto answer = [&](const std::string& b) {
    {
      std::lock_guard<std::mutex> l(mu);
      body = b;
    }
    absl::StatusOr<AccessToken> t =
        FetchCloudToken(CloudIdentity::kGoogle, "", kNow, testing::FakeGetenv);
    return t.ok() ? absl::StrCat("ok ", t->token, " ", absl::FormatDuration(t->expiration - kNow))
                  : std::string(t.status().message());
  };
  EXPECT_EQ(answer(R"({"access_token":"a","expires_in":"3599","token_type":"Bearer"})"),
            "ok a 59m59s");  // a string expires_in, as Entra's v1 endpoint wrote it
  EXPECT_EQ(answer(R"({"access_token":"a","expires_in":60})"), "ok a 1m");
  for (const char* bad :
       {R"({"expires_in":3599,"token_type":"Bearer"})",
        R"({"access_token":"a","token_type":"Bearer"})", R"({"access_token":"a","expires_in":-5})",
        R"({"access_token":"a","expires_in":3599,"token_type":"mac"})",
        R"({"access_token":5,"expires_in":3599})", "[1]", "<html>"}) {
    EXPECT_THAT(answer(bad), HasSubstr("the GKE metadata server at 127.0.0.1:")) << bad;
    EXPECT_THAT(answer(bad), Not(HasSubstr("ok "))) << bad;
  }
  testing::FakeEnvironment().clear();
}

}  // namespace
}  // namespace tessera::adapters
