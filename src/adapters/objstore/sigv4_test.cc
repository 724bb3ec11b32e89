// SigV4 against the worked examples of AWS's "Signature Calculations for the Authorization
// Header" page (examplebucket, AKIAIOSFODNN7EXAMPLE, 2013-05-24), S3 listing parsing, and the
// S3 source end to end against npm's s3rver on 127.0.0.1.
#include "adapters/objstore/sigv4.h"

#include <httplib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "adapters/io/test_scratch_dir.h"
#include "adapters/net/http_client.h"
#include "adapters/net/test_env.h"
#include "adapters/net/test_http_server.h"
#include "adapters/objstore/fetcher.h"
#include "adapters/objstore/s3_list.h"
#include "adapters/objstore/test_origins.h"
#include "adapters/objstore/verify.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters::objstore {
namespace {

using ::tessera::adapters::testing::FakeEnvironment;
using ::tessera::adapters::testing::FakeGetenv;
using ::tessera::adapters::testing::LocalHttpServer;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace ::tessera::adapters::objstore::testing;  // NOLINT

AwsCredentials AwsKeys(const std::string& id, const std::string& secret, const std::string& token) {
  AwsCredentials c;
  c.access_key_id = id;
  c.secret_access_key = secret;
  c.session_token = token;
  return c;
}

const AwsCredentials kExample =
    AwsKeys("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "");
absl::Time ExampleTime() { return absl::FromUnixSeconds(1369353600); }  // 20130524T000000Z

std::string Authorization(const std::vector<std::string>& headers) {
  for (const std::string& h : headers) {
    if (h.rfind("Authorization: ", 0) == 0) return h.substr(15);
  }
  return "";
}

TEST(SigV4, AwsExampleGetObjectWithRange) {
  absl::StatusOr<std::vector<std::string>> h =
      SignV4("GET", "https://examplebucket.s3.amazonaws.com/test.txt", {{"range", "bytes=0-9"}},
             kEmptySha256, kExample, "us-east-1", "s3", ExampleTime());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(Authorization(*h),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_THAT(*h, ::testing::Contains("x-amz-date: 20130524T000000Z"));
}

TEST(SigV4, AwsExampleListObjectsQueryIsSortedAndEncoded) {
  // The page's GET Bucket example: /?max-keys=2&prefix=J (given here out of order).
  absl::StatusOr<std::vector<std::string>> h =
      SignV4("GET", "https://examplebucket.s3.amazonaws.com/?prefix=J&max-keys=2", {}, kEmptySha256,
             kExample, "us-east-1", "s3", ExampleTime());
  ASSERT_TRUE(h.ok());
  EXPECT_THAT(
      Authorization(*h),
      HasSubstr("Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"));
  // The page's GET Bucket lifecycle example: a value-less query parameter.
  h = SignV4("GET", "https://examplebucket.s3.amazonaws.com/?lifecycle", {}, kEmptySha256, kExample,
             "us-east-1", "s3", ExampleTime());
  ASSERT_TRUE(h.ok());
  EXPECT_THAT(
      Authorization(*h),
      HasSubstr("Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"));
}

TEST(SigV4, CanonicalRequestEncodesOnceAndCarriesTheSessionToken) {
  std::string signed_headers;
  absl::StatusOr<std::string> c =
      CanonicalRequest("GET", "http://h:9000/b/dir/a%20b+c.safetensors?prefix=x%2Fy",
                       {{"Host", "h:9000"}}, kEmptySha256, &signed_headers);
  ASSERT_TRUE(c.ok());
  EXPECT_THAT(*c, HasSubstr("\n/b/dir/a%20b%2Bc.safetensors\nprefix=x%2Fy\nhost:h:9000\n"));
  AwsCredentials temp = kExample;
  temp.session_token = "FQoGZXIvYXdzE token";
  absl::StatusOr<std::vector<std::string>> h =
      SignV4("GET", "https://examplebucket.s3.amazonaws.com/test.txt", {}, kEmptySha256, temp,
             "us-east-1", "s3", ExampleTime());
  ASSERT_TRUE(h.ok());
  EXPECT_THAT(Authorization(*h), HasSubstr("SignedHeaders=host;x-amz-content-sha256;x-amz-date;"
                                           "x-amz-security-token,"));
  EXPECT_THAT(*h, ::testing::Contains("x-amz-security-token: FQoGZXIvYXdzE token"));
  // The secret never appears in what is sent.
  for (const std::string& line : *h) EXPECT_THAT(line, Not(HasSubstr(kExample.secret_access_key)));
}

// A second, independent SigV4 implementation as the oracle: curl's --aws-sigv4 signs requests to
// a local server that records them; ours must compute the same signature for the same request
// and time (paths and queries with characters that need encoding, a session token).
TEST(SigV4, AgreesWithCurlsIndependentSigner) {
  std::mutex mu;
  std::vector<std::pair<std::string, httplib::Headers>> seen;
  LocalHttpServer server([&](httplib::Server& s) {
    s.Get(".*", [&](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu);
      std::string target = req.target;
      seen.emplace_back(target, req.headers);
      res.status = 200;
    });
  });
  const std::vector<std::string> targets = {
      "/bucket/model-00001-of-00002.safetensors", "/bucket/dir/a%20b%2Bc.bin",
      // Already in sorted order: curl 7.88 signs the query as given (its canonical query sorting
      // came in curl 8.x); the sorting itself is covered by the AWS example above.
      "/bucket?continuation-token=t%2F1%3D%3D&list-type=2&prefix=llama%2F8b%2F"};
  for (const std::string& target : targets) {
    std::string cmd = absl::StrCat(
        "curl -sf -o /dev/null --aws-sigv4 aws:amz:eu-west-1:s3 --user 'AKIDEXAMPLE:se/cret+key' "
        "-H 'x-amz-content-sha256: ",
        kEmptySha256,
        "' -H 'x-amz-security-token: tok/en+1' "
        "'",
        server.url(target), "'");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  server.Stop();
  ASSERT_EQ(seen.size(), targets.size());
  for (const auto& entry : seen) {
    const std::string& target = entry.first;
    const auto& headers = entry.second;
    auto header = [&](const std::string& name) {
      auto it = headers.find(name);
      return it == headers.end() ? std::string() : it->second;
    };
    // YYYYMMDDTHHMMSSZ (absl's %Y is greedy, so by position).
    const std::string d = header("X-Amz-Date");
    ASSERT_EQ(d.size(), 16u) << d;
    auto num = [&](size_t at, size_t len) { return std::stoi(d.substr(at, len)); };
    absl::Time when = absl::FromCivil(
        absl::CivilSecond(num(0, 4), num(4, 2), num(6, 2), num(9, 2), num(11, 2), num(13, 2)),
        absl::UTCTimeZone());
    const AwsCredentials c = AwsKeys("AKIDEXAMPLE", "se/cret+key", "tok/en+1");
    absl::StatusOr<std::vector<std::string>> ours =
        SignV4("GET", server.url(target), {}, kEmptySha256, c, "eu-west-1", "s3", when);
    ASSERT_TRUE(ours.ok());
    std::string theirs = header("Authorization");
    std::string mine = Authorization(*ours);
    // Same scope, signed headers and signature (curl separates the parts with ", ").
    std::string sig = mine.substr(mine.find("Signature="));
    EXPECT_THAT(theirs, HasSubstr(sig)) << target << "\ncurl: " << theirs << "\nours: " << mine;
    EXPECT_THAT(theirs, HasSubstr("SignedHeaders=host;x-amz-content-sha256;x-amz-date;"
                                  "x-amz-security-token"));
  }
}

const char* FakeEnv(const char* name) {
  std::string n(name);
  if (n == "AWS_ACCESS_KEY_ID") return "AKID";
  if (n == "AWS_SECRET_ACCESS_KEY") return "SECRET";
  if (n == "AWS_REGION") return "eu-west-1";
  return nullptr;
}

TEST(S3Source, AddressingFromTheEnvironment) {
  absl::StatusOr<S3Location> l = ParseS3Source("s3://my-models/llama/8b/", FakeEnv);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->region, "eu-west-1");
  EXPECT_FALSE(l->path_style);
  EXPECT_EQ(l->ObjectUrl("llama/8b/a b.safetensors"),
            "https://my-models.s3.eu-west-1.amazonaws.com/llama/8b/a%20b.safetensors");
  EXPECT_EQ(l->credentials.access_key_id, "AKID");
  EXPECT_EQ(l->credentials.source, "AWS_ACCESS_KEY_ID");
  l = ParseS3Source("s3://my.dotted.bucket/x", FakeEnv);
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->path_style);  // dots break virtual-hosted TLS names
  EXPECT_EQ(l->ObjectUrl("x"), "https://s3.eu-west-1.amazonaws.com/my.dotted.bucket/x");
  EXPECT_THAT(ParseS3Source("s3://Bad_Bucket/x", FakeEnv).status().message(),
              HasSubstr("not a valid S3 bucket name"));
  EXPECT_FALSE(ParseS3Source("http://x/y", FakeEnv).ok());
}

TEST(S3Source, SharedCredentialsFileAndProfile) {
  const adapters::testing::ScratchDir scratch("aws-shared-creds");
  const std::string& dir = scratch.path();
  const std::string path = dir + "/credentials";
  std::ofstream(path) << "# rotated by the Secret\n[default]\naws_access_key_id = AKIDDEFAULT\n"
                         "aws_secret_access_key = s3cr3t/default\n\n[models]\n"
                         "aws_access_key_id=AKIDMODELS\naws_secret_access_key=s3cr3t+models\n"
                         "aws_session_token = tok\n";
  FakeEnvironment() = {{"AWS_SHARED_CREDENTIALS_FILE", path}};
  absl::StatusOr<S3Location> l = ParseS3Source("s3://bucket/m/", FakeGetenv);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->credentials.access_key_id, "AKIDDEFAULT");
  EXPECT_EQ(l->credentials.secret_access_key, "s3cr3t/default");
  FakeEnvironment()["AWS_PROFILE"] = "models";
  l = ParseS3Source("s3://bucket/m/", FakeGetenv);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->credentials.access_key_id, "AKIDMODELS");
  EXPECT_EQ(l->credentials.source, "the shared credentials file " + path + ", profile models");
  EXPECT_EQ(l->credentials.session_token, "tok");
  // The variables win over the file.
  FakeEnvironment()["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  FakeEnvironment()["AWS_SECRET_ACCESS_KEY"] = "envsecret";
  l = ParseS3Source("s3://bucket/m/", FakeGetenv);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->credentials.access_key_id, "AKIDENV");
  EXPECT_EQ(l->credentials.source, "AWS_ACCESS_KEY_ID");  // the environment wins over the file
  // A named profile or file that is not there is an error; the default ones mean anonymous.
  FakeEnvironment() = {{"AWS_SHARED_CREDENTIALS_FILE", path}, {"AWS_PROFILE", "nope"}};
  EXPECT_THAT(ParseS3Source("s3://bucket/m/", FakeGetenv).status().message(),
              HasSubstr("no profile [nope]"));
  FakeEnvironment() = {{"AWS_SHARED_CREDENTIALS_FILE", dir + "/missing"}};
  EXPECT_THAT(ParseS3Source("s3://bucket/m/", FakeGetenv).status().message(),
              HasSubstr("AWS_SHARED_CREDENTIALS_FILE " + dir + "/missing: no such file"));
  FakeEnvironment() = {{"HOME", dir}};  // no $HOME/.aws/credentials
  l = ParseS3Source("s3://bucket/m/", FakeGetenv);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_TRUE(l->credentials.anonymous());
  FakeEnvironment().clear();
}

TEST(S3Source, SharedCredentialsErrorsAreLocatedAndQuoteNoSecret) {
  EXPECT_THAT(ParseSharedCredentials("[default\n", "f", "default").status().message(),
              HasSubstr("f:1: expected a section header"));
  EXPECT_THAT(ParseSharedCredentials("[default]\nkey id AKID\n", "f", "default").status().message(),
              HasSubstr("f:2: expected [profile] or key = value"));
  absl::Status s =
      ParseSharedCredentials("[default]\naws_secret_access_key = TOPSECRET\n", "f", "default")
          .status();
  EXPECT_THAT(s.message(), HasSubstr("needs both aws_access_key_id and aws_secret_access_key"));
  EXPECT_THAT(s.message(), Not(HasSubstr("TOPSECRET")));
  EXPECT_TRUE(absl::IsNotFound(ParseSharedCredentials("[a]\nx = 1\n", "f", "b").status()));
}

TEST(S3Source, ContainerCredentialsEndpoint) {
  // The EKS Pod Identity agent's protocol: GET with the token file's content as Authorization.
  std::mutex mu;
  std::string auth_seen;
  LocalHttpServer server([&](httplib::Server& srv) {
    srv.Get("/v1/credentials", [&](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu);
      auth_seen = req.get_header_value("Authorization");
      if (auth_seen != "eyJ.pod.token") {
        res.status = 403;
        res.set_content(R"({"code": "AccessDeniedException", "message": "bad token"})",
                        "application/json");
        return;
      }
      res.set_content(R"({"AccessKeyId": "ASIAPOD", "SecretAccessKey": "podsecret",
                        "Token": "podtoken", "Expiration": "2026-12-03T06:03:31Z"})",
                      "application/json");
    });
  });
  const adapters::testing::ScratchDir scratch("aws-pod-identity");
  const std::string& dir = scratch.path();
  std::ofstream(dir + "/token") << "eyJ.pod.token\n";
  const std::string uri = server.url("/v1/credentials");
  FakeEnvironment() = {{"AWS_CONTAINER_CREDENTIALS_FULL_URI", uri},
                       {"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", dir + "/token"}};
  absl::StatusOr<S3Location> l = ParseS3Source("s3://bucket/m/", FakeGetenv);
  ASSERT_TRUE(l.ok()) << l.status();
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(auth_seen, "eyJ.pod.token");  // the file's newline is not sent
  }
  EXPECT_EQ(l->credentials.access_key_id, "ASIAPOD");
  EXPECT_EQ(l->credentials.source, "the container credentials endpoint (EKS Pod Identity, ECS)");
  EXPECT_EQ(l->credentials.secret_access_key, "podsecret");
  EXPECT_EQ(l->credentials.session_token, "podtoken");
  // 2026-12-03T06:03:31Z
  EXPECT_EQ(l->credentials.expiration, absl::FromUnixSeconds(1796277811));
  // A refused token: the endpoint's code and message, never the token.
  FakeEnvironment()["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = "";
  FakeEnvironment()["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "wrong-token";
  absl::Status s = ParseS3Source("s3://bucket/m/", FakeGetenv).status();
  EXPECT_THAT(s.message(), HasSubstr("HTTP 403"));
  EXPECT_THAT(s.message(), HasSubstr("AccessDeniedException: bad token"));
  EXPECT_THAT(s.message(), Not(HasSubstr("wrong-token")));
  server.Stop();
  // Plain HTTP only to loopback or the agents' addresses; an unreadable token file is named.
  FakeEnvironment() = {{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://10.1.2.3/creds"}};
  EXPECT_THAT(ParseS3Source("s3://bucket/m/", FakeGetenv).status().message(),
              HasSubstr("expected https, a loopback address"));
  FakeEnvironment() = {{"AWS_CONTAINER_CREDENTIALS_FULL_URI", uri},
                       {"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", dir + "/missing"}};
  EXPECT_THAT(ParseS3Source("s3://bucket/m/", FakeGetenv).status().message(),
              HasSubstr("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"));
  // The keys in the environment win: no endpoint is asked.
  FakeEnvironment() = {{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://10.1.2.3/creds"},
                       {"AWS_ACCESS_KEY_ID", "AKID"},
                       {"AWS_SECRET_ACCESS_KEY", "s"}};
  EXPECT_TRUE(ParseS3Source("s3://bucket/m/", FakeGetenv).ok());
  FakeEnvironment().clear();
  EXPECT_THAT(ParseContainerCredentials(R"({"AccessKeyId": 5})").status().message(),
              HasSubstr("expected string AccessKeyId and SecretAccessKey"));
  EXPECT_FALSE(ParseContainerCredentials("<html>").ok());
  // No expiry, or one that is not RFC 3339: none (AwsCredentialCache does not keep them).
  EXPECT_EQ(
      ParseContainerCredentials(R"({"AccessKeyId": "A", "SecretAccessKey": "s"})")->expiration,
      absl::InfiniteFuture());
  EXPECT_EQ(ParseContainerCredentials(
                R"({"AccessKeyId": "A", "SecretAccessKey": "s", "Expiration": "tomorrow"})")
                ->expiration,
            absl::InfiniteFuture());
}

TEST(S3Source, WebIdentityThroughSts) {
  // IRSA: the projected service-account token is exchanged at STS (here a local stand-in that
  // answers in the documented AssumeRoleWithWebIdentityResponse shape).
  std::mutex mu;
  httplib::Params seen;
  LocalHttpServer sts([&](httplib::Server& srv) {
    srv.Post("/", [&](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu);
      seen = req.params;
      if (req.get_param_value("WebIdentityToken") != "eyJ.sa.token") {
        res.status = 400;
        res.set_content(
            "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error>"
            "<Type>Sender</Type><Code>InvalidIdentityToken</Code><Message>Token expired</Message>"
            "</Error><RequestId>r1</RequestId></ErrorResponse>",
            "text/xml");
        return;
      }
      res.set_content(
          "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
          "<AssumeRoleWithWebIdentityResult><Credentials><SessionToken>sts/token+1</SessionToken>"
          "<SecretAccessKey>stssecret</SecretAccessKey><Expiration>2026-12-03T06:00:00Z"
          "</Expiration><AccessKeyId>ASIASTS</AccessKeyId></Credentials>"
          "<Audience>sts.amazonaws.com</Audience></AssumeRoleWithWebIdentityResult>"
          "</AssumeRoleWithWebIdentityResponse>",
          "text/xml");
    });
  });
  const adapters::testing::ScratchDir scratch("aws-irsa");
  const std::string& dir = scratch.path();
  std::ofstream(dir + "/token") << "eyJ.sa.token\n";
  std::ofstream(dir + "/old") << "eyJ.expired\n";
  FakeEnvironment() = {{"AWS_WEB_IDENTITY_TOKEN_FILE", dir + "/token"},
                       {"AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/models-reader"},
                       {"AWS_ENDPOINT_URL_STS", sts.url()}};
  absl::StatusOr<S3Location> l = ParseS3Source("s3://bucket/m/", FakeGetenv);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->credentials.access_key_id, "ASIASTS");
  EXPECT_EQ(l->credentials.source,
            "IRSA: role arn:aws:iam::123456789012:role/models-reader through STS at " + sts.url());
  EXPECT_EQ(l->credentials.secret_access_key, "stssecret");
  EXPECT_EQ(l->credentials.session_token, "sts/token+1");
  // 2026-12-03T06:00:00Z
  EXPECT_EQ(l->credentials.expiration, absl::FromUnixSeconds(1796277600));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(seen.find("Action")->second, "AssumeRoleWithWebIdentity");
    EXPECT_EQ(seen.find("Version")->second, "2011-06-15");
    EXPECT_EQ(seen.find("RoleArn")->second, "arn:aws:iam::123456789012:role/models-reader");
    EXPECT_EQ(seen.find("RoleSessionName")->second, "tessera-node-agent");
  }
  // STS's refusal: its code and message, not the token.
  FakeEnvironment()["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir + "/old";
  absl::Status s = ParseS3Source("s3://bucket/m/", FakeGetenv).status();
  EXPECT_THAT(s.message(), HasSubstr("HTTP 400"));
  EXPECT_THAT(s.message(), HasSubstr("InvalidIdentityToken: Token expired"));
  EXPECT_THAT(s.message(), Not(HasSubstr("eyJ.expired")));
  sts.Stop();
  FakeEnvironment()["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir + "/missing";
  EXPECT_THAT(ParseS3Source("s3://bucket/m/", FakeGetenv).status().message(),
              HasSubstr("AWS_WEB_IDENTITY_TOKEN_FILE"));
  FakeEnvironment().clear();
  EXPECT_THAT(ParseAssumeRoleWithWebIdentity("<Credentials><AccessKeyId>A</AccessKeyId>"
                                             "</Credentials>")
                  .status()
                  .message(),
              HasSubstr("needs AccessKeyId, SecretAccessKey and SessionToken"));
}

TEST(SigV4, ServicesOtherThanS3SignThePathEncodedTwice) {
  // AWS: "each path segment must be URI-encoded twice, except for Amazon S3".
  std::string signed_headers;
  absl::StatusOr<std::string> s3 = CanonicalRequest("GET", "https://h/ws-1/a%20b/c?x=1", {},
                                                    kEmptySha256, &signed_headers, true);
  absl::StatusOr<std::string> aps = CanonicalRequest("GET", "https://h/ws-1/a%20b/c?x=1", {},
                                                     kEmptySha256, &signed_headers, false);
  ASSERT_TRUE(s3.ok() && aps.ok());
  EXPECT_THAT(*s3, HasSubstr("GET\n/ws-1/a%20b/c\nx=1\n"));
  EXPECT_THAT(*aps, HasSubstr("GET\n/ws-1/a%2520b/c\nx=1\n"));  // the query is encoded once
  // SignV4 chooses by the service: the same request signs differently for s3 and aps.
  auto sign = [](const char* service) {
    absl::StatusOr<std::vector<std::string>> h = SignV4(
        "GET", "https://h/a%20b", {}, kEmptySha256, kExample, "us-east-1", service, ExampleTime());
    return h.ok() ? Authorization(*h) : h.status().ToString();
  };
  EXPECT_THAT(sign("aps"), HasSubstr("/us-east-1/aps/aws4_request"));
  EXPECT_NE(sign("s3").substr(sign("s3").find("Signature=")),
            sign("aps").substr(sign("aps").find("Signature=")));
}

TEST(AwsCredentialCache, KeepsTemporaryCredentialsUntilJustBeforeTheyExpire) {
  // A container credentials endpoint (EKS Pod Identity's protocol) that counts its answers and
  // gives credentials valid for an hour from `issued`, numbered so each answer can be told.
  std::mutex mu;
  int asked = 0;
  bool failing = false;
  absl::Time issued = absl::FromUnixSeconds(1796968000);  // 2026-12-11T05:46:40Z
  absl::Duration validity = absl::Hours(1);
  LocalHttpServer server([&](httplib::Server& srv) {
    srv.Get("/creds", [&](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu);
      ++asked;
      if (failing) {
        res.status = 500;
        return;
      }
      res.set_content(
          absl::StrCat(R"({"AccessKeyId": "ASIA)", asked,
                       R"(", "SecretAccessKey": "s", "Token": "t", "Expiration": ")",
                       absl::FormatTime(absl::RFC3339_sec, issued + validity, absl::UTCTimeZone()),
                       R"("})"),
          "application/json");
    });
  });
  auto answers = [&] {
    std::lock_guard<std::mutex> l(mu);
    return asked;
  };
  FakeEnvironment() = {{"AWS_CONTAINER_CREDENTIALS_FULL_URI", server.url("/creds")}};
  AwsCredentialCache cache("us-west-2", "tessera-test", FakeGetenv);
  const absl::Time t0 = issued;
  absl::StatusOr<AwsCredentials> c = cache.Get(t0);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "ASIA1");
  EXPECT_EQ(c->expiration, t0 + absl::Hours(1));
  // Kept: a query every 5 s for 54 minutes asks the endpoint no more.
  for (absl::Duration d = absl::Seconds(5); d < absl::Minutes(55); d += absl::Seconds(5)) {
    ASSERT_EQ(cache.Get(t0 + d)->access_key_id, "ASIA1");
  }
  EXPECT_EQ(answers(), 1);
  // Five minutes before the expiry, new ones.
  {
    std::lock_guard<std::mutex> l(mu);
    issued = t0 + absl::Minutes(55);
  }
  EXPECT_EQ(cache.Get(t0 + absl::Minutes(55))->access_key_id, "ASIA2");
  EXPECT_EQ(answers(), 2);
  // The endpoint fails when they are due again: the kept ones serve while valid, and it is
  // asked again after kRetryAfterFailure, not at each Get; once they have expired, the failure
  // shows.
  {
    std::lock_guard<std::mutex> l(mu);
    failing = true;
  }
  const absl::Time expiry = t0 + absl::Minutes(115);
  EXPECT_EQ(cache.Get(expiry - absl::Minutes(4))->access_key_id, "ASIA2");
  EXPECT_EQ(cache.Get(expiry - absl::Minutes(4) + absl::Seconds(5))->access_key_id, "ASIA2");
  EXPECT_EQ(cache.Get(expiry - absl::Seconds(1))->access_key_id, "ASIA2");
  EXPECT_EQ(answers(), 4);
  absl::Status late = cache.Get(expiry).status();
  EXPECT_EQ(late.code(), absl::StatusCode::kPermissionDenied) << late;
  EXPECT_THAT(late.message(), HasSubstr("HTTP 500"));
  EXPECT_EQ(answers(), 4);  // held since the failure a second before
  // Back, and after Invalidate (a service refused them) asked at once.
  {
    std::lock_guard<std::mutex> l(mu);
    failing = false;
    issued = expiry;
  }
  EXPECT_EQ(cache.Get(expiry + absl::Seconds(10))->access_key_id, "ASIA5");
  EXPECT_EQ(cache.Get(expiry + absl::Seconds(11))->access_key_id, "ASIA5");
  cache.Invalidate();
  EXPECT_EQ(cache.Get(expiry + absl::Seconds(12))->access_key_id, "ASIA6");
  EXPECT_EQ(answers(), 6);
  // Credentials issued with 6 minutes left are kept for half of that, not asked for at each Get.
  const absl::Time t1 = expiry + absl::Minutes(10);
  {
    std::lock_guard<std::mutex> l(mu);
    issued = t1;
    validity = absl::Minutes(6);
  }
  cache.Invalidate();
  EXPECT_EQ(cache.Get(t1)->access_key_id, "ASIA7");
  EXPECT_EQ(cache.Get(t1 + absl::Seconds(179))->access_key_id, "ASIA7");
  EXPECT_EQ(cache.Get(t1 + absl::Seconds(180))->access_key_id, "ASIA8");
  server.Stop();
  // Keys from the environment have no expiry and are not kept.
  FakeEnvironment() = {{"AWS_ACCESS_KEY_ID", "AKID1"}, {"AWS_SECRET_ACCESS_KEY", "s"}};
  AwsCredentialCache keys("us-west-2", "tessera-test", FakeGetenv);
  EXPECT_EQ(keys.Get(t0)->access_key_id, "AKID1");
  EXPECT_EQ(keys.Get(t0)->expiration, absl::InfiniteFuture());
  // Keys from the environment are read at every Get: a changed key applies at once.
  FakeEnvironment()["AWS_ACCESS_KEY_ID"] = "AKID2";
  EXPECT_EQ(keys.Get(t0 + absl::Seconds(1))->access_key_id, "AKID2");
  FakeEnvironment() = {{"AWS_ACCESS_KEY_ID", "AKID1"}};
  EXPECT_THAT(keys.Get(t0 + absl::Seconds(2)).status().message(),
              HasSubstr("must be set together"));
  FakeEnvironment().clear();
  EXPECT_THAT(keys.Get(t0 + absl::Seconds(3)).status().message(),
              HasSubstr("must be set together"));
  EXPECT_TRUE(keys.Get(t0 + absl::Seconds(12))->anonymous());
}

TEST(AwsCredentialCache, AssumesARoleInAnotherAccountWithTheEnvironmentsCredentials) {
  // An STS stand-in that checks each AssumeRole request's signature (recomputed with the base
  // keys over what it received) and answers credentials valid for an hour, numbered; or refuses.
  std::mutex mu;
  int asked = 0;
  bool refuse = false;
  std::string body;
  std::string signature_check;
  LocalHttpServer sts([&](httplib::Server& srv) {
    srv.Post("/", [&](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu);
      ++asked;
      body = req.body;
      absl::Time date;
      std::string err;
      if (!absl::ParseTime("%E4Y%m%dT%H%M%SZ", req.get_header_value("x-amz-date"), &date, &err)) {
        signature_check = "no x-amz-date";
      } else {
        AwsCredentials base;
        base.access_key_id = "AKIDBASE";
        base.secret_access_key = "base-secret";
        absl::StatusOr<std::vector<std::string>> expected =
            SignV4("POST", absl::StrCat("http://", req.get_header_value("Host"), "/"),
                   {{"content-type", req.get_header_value("Content-Type")}}, Sha256Hex(req.body),
                   base, "us-west-2", "sts", date);
        std::string authorization = "Authorization: " + req.get_header_value("Authorization");
        signature_check = expected.ok() && (*expected)[0] == authorization
                              ? "ok"
                              : absl::StrCat("expected ", expected.ok() ? (*expected)[0] : "-",
                                             ", got ", authorization);
      }
      if (refuse) {
        res.status = 403;
        res.set_content(
            "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>User: "
            "arn:aws:iam::444455556666:user/ci is not authorized to perform: sts:AssumeRole on "
            "resource: arn:aws:iam::111122223333:role/amp-query</Message></Error></ErrorResponse>",
            "text/xml");
        return;
      }
      res.set_content(
          absl::StrCat(
              "<AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>ASIAROLE", asked,
              "</AccessKeyId><SecretAccessKey>role-secret</SecretAccessKey>",
              "<SessionToken>role-token</SessionToken><Expiration>",
              absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", date + absl::Hours(1), absl::UTCTimeZone()),
              "</Expiration></Credentials></AssumeRoleResult></AssumeRoleResponse>"),
          "text/xml");
    });
  });
  auto seen = [&] {
    std::lock_guard<std::mutex> l(mu);
    return absl::StrCat(asked, " ", signature_check);
  };
  FakeEnvironment() = {{"AWS_ACCESS_KEY_ID", "AKIDBASE"},
                       {"AWS_SECRET_ACCESS_KEY", "base-secret"},
                       {"AWS_ENDPOINT_URL_STS", sts.url("/")}};
  const std::string role = "arn:aws:iam::111122223333:role/amp-query";
  AwsCredentialCache cache("us-west-2", "tessera-test", FakeGetenv, role);
  const absl::Time t0 = absl::FromUnixSeconds(1796968000);  // 2026-12-11T05:46:40Z
  absl::StatusOr<AwsCredentials> c = cache.Get(t0);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "ASIAROLE1");
  EXPECT_EQ(c->session_token, "role-token");
  EXPECT_EQ(c->expiration, t0 + absl::Hours(1));
  EXPECT_EQ(c->source, absl::StrCat("STS AssumeRole of ", role, " at ", sts.url(),
                                    ", with credentials from AWS_ACCESS_KEY_ID"));
  EXPECT_EQ(seen(), "1 ok");
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(body,
              "Action=AssumeRole&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A111122223333%3A"
              "role%2Famp-query&RoleSessionName=tessera-test");
  }
  // Kept like any temporary credentials: not asked again for 55 minutes.
  EXPECT_EQ(cache.Get(t0 + absl::Minutes(54))->access_key_id, "ASIAROLE1");
  EXPECT_EQ(cache.Get(t0 + absl::Minutes(55))->access_key_id, "ASIAROLE2");
  EXPECT_EQ(seen(), "2 ok");
  // The role does not trust the base identity: STS's own words.
  {
    std::lock_guard<std::mutex> l(mu);
    refuse = true;
  }
  cache.Invalidate();
  absl::Status denied = cache.Get(t0 + absl::Minutes(56)).status();
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied) << denied;
  EXPECT_THAT(std::string(denied.message()),
              HasSubstr(absl::StrCat("STS AssumeRole of ", role, " at ", sts.url(),
                                     ": HTTP 403 (STS AssumeRole: AccessDenied: User: "
                                     "arn:aws:iam::444455556666:user/ci is not authorized")));
  EXPECT_THAT(std::string(denied.message()), Not(HasSubstr("base-secret")));
  // Nothing to assume it with.
  FakeEnvironment() = {{"AWS_ENDPOINT_URL_STS", sts.url("/")}};
  AwsCredentialCache nothing("us-west-2", "tessera-test", FakeGetenv, role);
  absl::Status none = nothing.Get(t0).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(none.message()),
              HasSubstr(absl::StrCat("no AWS credentials to assume ", role, " with (expected")));
  FakeEnvironment().clear();
}

TEST(S3List, PagesEntitiesAndErrors) {
  absl::StatusOr<S3ListPage> p = ParseListObjectsV2(
      "<?xml version=\"1.0\"?><ListBucketResult><Name>b</Name><Prefix>m/</Prefix>"
      "<Contents><Key>m/a&amp;b.bin</Key><Size>12</Size><ETag>&quot;abc&quot;</ETag></Contents>"
      "<Contents><Key>m/caf&#xE9;.bin</Key><Size>0</Size></Contents>"
      "<IsTruncated>true</IsTruncated><NextContinuationToken>t/1==</NextContinuationToken>"
      "</ListBucketResult>");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->objects.size(), 2u);
  EXPECT_EQ(p->objects[0].key, "m/a&b.bin");
  EXPECT_EQ(p->objects[0].size, 12);
  EXPECT_EQ(p->objects[0].etag, "\"abc\"");
  EXPECT_EQ(p->objects[1].key, "m/caf\xC3\xA9.bin");
  EXPECT_TRUE(p->truncated);
  EXPECT_EQ(p->next_token, "t/1==");
  EXPECT_THAT(ParseListObjectsV2("<Error><Code>AccessDenied</Code><Message>Access Denied"
                                 "</Message></Error>")
                  .status()
                  .message(),
              HasSubstr("AccessDenied: Access Denied"));
  EXPECT_FALSE(ParseListObjectsV2("<ListBucketResult><Contents><Key>k</Key><Size>-1</Size>"
                                  "</Contents></ListBucketResult>")
                   .ok());
  EXPECT_FALSE(ParseListObjectsV2("<ListBucketResult><IsTruncated>true</IsTruncated>"
                                  "</ListBucketResult>")
                   .ok());
}

// PUTs an object with a SigV4-signed request (UNSIGNED-PAYLOAD, as the AWS CLI streams).
void Put(const S3Location& loc, const std::string& key, const std::string& data) {
  HttpRequest req;
  req.method = "PUT";
  req.url = loc.ObjectUrl(key);
  req.body = data;
  absl::StatusOr<std::vector<std::string>> h = SignV4(
      "PUT", req.url, {}, "UNSIGNED-PAYLOAD", loc.credentials, loc.region, "s3", absl::Now());
  ASSERT_TRUE(h.ok());
  req.headers = *h;
  absl::StatusOr<HttpResponse> r = Fetch(req);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 200) << r->body;
}

TEST(S3Source, FetchesAPrefixFromS3rverWithSigV4) {
  S3rver s3("models");
  ASSERT_TRUE(s3.available()) << "s3rver is missing: run scripts/setup-deps";
  ASSERT_TRUE(s3.ready()) << "s3rver did not answer within 30 s";
  setenv("AWS_ENDPOINT_URL", s3.endpoint().c_str(), 1);
  setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
  setenv("AWS_REGION", "us-east-1", 1);
  absl::StatusOr<S3Location> loc = ParseS3Source("s3://models/llama/");
  ASSERT_TRUE(loc.ok());
  EXPECT_TRUE(loc->path_style);
  std::string a = Safetensors(4, int64_t{64} * 1024, 1), b = Safetensors(2, int64_t{32} * 1024, 2);
  Put(*loc, "llama/model-00001-of-00002.safetensors", a);
  Put(*loc, "llama/sub dir/model-00002-of-00002.safetensors", b);
  Put(*loc, "other/ignored.bin", "x");
  nlohmann::json manifest = {{"files",
                              {{{"name", "model-00001-of-00002.safetensors"},
                                {"size", a.size()},
                                {"sha256", Sha256Hex(a)}}}}};
  Put(*loc, "llama/tessera-manifest.json", manifest.dump());

  FetchOptions o;
  o.chunk_bytes = 64 << 10;
  o.connections = 4;
  absl::StatusOr<std::vector<FileSpec>> files = ResolveSource("s3://models/llama/", o);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 3u);
  for (const FileSpec& f : *files) {
    if (f.name == "model-00001-of-00002.safetensors") {
      EXPECT_EQ(f.sha256, Sha256Hex(a));
    }
    EXPECT_THAT(f.name, Not(HasSubstr("ignored")));
  }
  std::string out = TempDir() + "/llama";
  absl::StatusOr<FetchStats> s = FetchModel(*files, out, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Read(out + "/model-00001-of-00002.safetensors"), a);
  EXPECT_EQ(Read(out + "/sub dir/model-00002-of-00002.safetensors"), b);
  EXPECT_GT(s->origin_bytes, static_cast<int64_t>(a.size()));

  // One object by its key.
  files = ResolveSource("s3://models/llama/sub dir/model-00002-of-00002.safetensors", o);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 1u);
  EXPECT_EQ((*files)[0].name, "model-00002-of-00002.safetensors");

  // A manifest that lists a file the bucket does not hold (an upload that did not finish), or
  // an entry it cannot read, is an error, not a partial list of checksums.
  manifest["files"].push_back({{"name", "model-00003-of-00003.safetensors"}, {"size", 1}});
  Put(*loc, "llama/tessera-manifest.json", manifest.dump());
  files = ResolveSource("s3://models/llama/", o);
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(files.status().message(),
              HasSubstr("lists model-00003-of-00003.safetensors, which is not under "
                        "s3://models/llama/"));
  manifest["files"][1] = {{"name", "model-00001-of-00002.safetensors"}, {"size", 1}};
  Put(*loc, "llama/tessera-manifest.json", manifest.dump());
  files = ResolveSource("s3://models/llama/", o);
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(files.status().message(), HasSubstr("files[1]: duplicate name"));
  manifest["files"].erase(1);
  Put(*loc, "llama/tessera-manifest.json", manifest.dump());

  // An unknown access key: S3's error code reaches the message; the secret never does.
  setenv("AWS_ACCESS_KEY_ID", "NOT-A-KEY", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "very-secret-value", 1);
  files = ResolveSource("s3://models/llama/", o);
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(files.status().message(), HasSubstr("InvalidAccessKeyId"));
  EXPECT_THAT(files.status().message(), Not(HasSubstr("very-secret-value")));
  // An empty prefix is an error, not an empty model.
  setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
  files = ResolveSource("s3://models/nothing-here/", o);
  EXPECT_THAT(files.status().message(), HasSubstr("no objects under this prefix"));
  for (const char* v :
       {"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"}) {
    unsetenv(v);
  }
}

}  // namespace
}  // namespace tessera::adapters::objstore
