// Every outcome of a PromQL instant query, against a local HTTP server that answers as
// Prometheus does (bodies in the shape of Prometheus 2.x's /api/v1/query).
#include "adapters/prometheus/prom_client.h"

#include <httplib.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "adapters/io/test_scratch_dir.h"
#include "adapters/net/test_certs.h"
#include "adapters/net/test_env.h"
#include "adapters/net/test_http_server.h"
#include "adapters/prometheus/test_slow_range.h"
#include "base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

PromConfig Plain(const std::string& url) {
  PromConfig c;
  c.url = url;
  c.timeout_ms = 500;
  return c;
}

constexpr char kSeventeen[] =
    R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1764700000,"17"]}]}})";

class FakePrometheus {
 public:
  FakePrometheus() {
    answers_["one"] = {
        200,
        R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1764700000.123,"17"]}]}})"};
    answers_["empty"] = {200, R"({"status":"success","data":{"resultType":"vector","result":[]}})"};
    answers_["nan"] = {
        200,
        R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1764700000,"NaN"]}]}})"};
    answers_["two"] = {
        200,
        R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"a"},"value":[1,"1"]},{"metric":{"pod":"b"},"value":[1,"2"]}]}})"};
    answers_["scalar"] = {
        200, R"({"status":"success","data":{"resultType":"scalar","result":[1764700000,"0.75"]}})"};
    answers_["timeout"] = {
        503,
        R"({"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"})"};
    answers_["gateway"] = {502, "<html>Bad Gateway</html>"};
    answers_["slow"] = answers_["one"];
    server_ = std::make_unique<testing::LocalHttpServer>([this](httplib::Server& s) {
      s.Get("/api/v1/query", [this](const httplib::Request& req, httplib::Response& res) {
        std::string q = req.get_param_value("query");
        {
          std::lock_guard<std::mutex> l(mu_);
          last_query_ = q;
          last_time_ = req.has_param("time") ? req.get_param_value("time") : "(none)";
        }
        if (q == "slow") {
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        }
        auto it = answers_.find(q);
        if (it == answers_.end()) {
          res.status = 400;
          res.set_content(
              R"({"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:5: parse error: unexpected <EOF>"})",
              "application/json");
          return;
        }
        res.status = it->second.first;
        res.set_content(it->second.second, "application/json");
      });
    });
  }
  std::string url() const { return server_->url(); }
  std::string last_query() {
    std::lock_guard<std::mutex> l(mu_);
    return last_query_;
  }
  std::string last_time() {  // the `time` parameter, or "(none)"
    std::lock_guard<std::mutex> l(mu_);
    return last_time_;
  }

 private:
  std::mutex mu_;           // the server answers on several threads at once
  std::string last_query_;  // guarded by mu_
  std::string last_time_;   // guarded by mu_
  std::map<std::string, std::pair<int, std::string>> answers_;
  std::unique_ptr<testing::LocalHttpServer> server_;  // last: stopped before the answers go
};

TEST(PromClient, EveryOutcome) {
  FakePrometheus fake;
  PromClient prom(Plain(fake.url()));
  absl::StatusOr<PromValue> v = prom.Query("one");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->value, 17);
  EXPECT_FALSE(v->empty);
  EXPECT_EQ(absl::ToUnixMillis(v->sampled), 1764700000123);
  EXPECT_EQ(fake.last_time(), "(none)");  // at Prometheus' own now

  // At a time asked for, to its milliseconds (finer is dropped, as Prometheus keeps).
  v = prom.Query("one", absl::FromUnixMicros(int64_t{1764700005} * 1000000 + 42999));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(fake.last_time(), "1764700005.042");
  EXPECT_EQ(prom.Query("one", absl::InfiniteFuture()).status().code(),
            absl::StatusCode::kInvalidArgument);

  v = prom.Query("empty");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->empty);

  EXPECT_EQ(prom.Query("nan").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(prom.Query("nan").status().message(), HasSubstr("not a number"));
  EXPECT_EQ(prom.Query("two").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(prom.Query("two").status().message(), HasSubstr("aggregate"));
  EXPECT_EQ(prom.Query("scalar")->value, 0.75);

  absl::Status bad = prom.Query("sum(").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("bad_data"));
  EXPECT_THAT(bad.message(), HasSubstr("parse error"));
  EXPECT_EQ(fake.last_query(), "sum(");  // the query arrived URL-decoded intact

  EXPECT_EQ(prom.Query("timeout").status().code(), absl::StatusCode::kUnavailable);
  absl::Status gw = prom.Query("gateway").status();
  EXPECT_EQ(gw.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(gw.message(), HasSubstr("HTTP 502"));

  absl::Status slow = prom.Query("slow").status();
  EXPECT_EQ(slow.code(), absl::StatusCode::kDeadlineExceeded) << slow;

  // A timeout and a refused connection name the endpoint, not the escaped query: the same
  // problem for every query (the scaler logs it once).
  EXPECT_THAT(slow.message(), HasSubstr(fake.url() + "/api/v1/query: "));
  EXPECT_THAT(slow.message(), Not(HasSubstr("query=")));
  PromClient nobody(Plain("http://127.0.0.1:1"));
  absl::Status refused = nobody.Query("sum(up)").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(refused.message(), nobody.Query("sum(other)").status().message());
  EXPECT_THAT(refused.message(), HasSubstr("http://127.0.0.1:1/api/v1/query: "));
}

TEST(PromClient, ParsesOddBodies) {
  EXPECT_EQ(ParsePromResponse(200, "not json").status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(
      ParsePromResponse(200, R"({"status":"success","data":{"resultType":"matrix","result":[]}})")
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ParsePromResponse(
          200,
          R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"+Inf"]}]}})")
          .status()
          .code(),
      absl::StatusCode::kUnavailable);
  // Fields of the wrong JSON type (a proxy or a look-alike answering) are errors, not a crash
  // (nlohmann's value() throws on them; found by scaler_inputs_fuzz).
  auto code = [](long http, const char* body) { return ParsePromResponse(http, body).status(); };
  EXPECT_EQ(code(200, R"({"status":5})").code(), absl::StatusCode::kInternal);
  EXPECT_EQ(code(503, R"({"status":"error","errorType":7,"error":[1]})").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(code(200, R"({"status":"success","data":{"resultType":{"a":1},"result":[]}})").code(),
            absl::StatusCode::kInvalidArgument);
  // A sample time no clock reaches.
  absl::Status far =
      code(200, R"({"status":"success","data":{"resultType":"scalar","result":[1e300,"1"]}})");
  EXPECT_EQ(far.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(far.message(), HasSubstr("sample time"));
  // A sample nested 100,000 deep: quoting it whole in the error overflowed the stack.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  absl::Status nested =
      ParsePromResponse(
          200, absl::StrCat(R"({"status":"success","data":{"resultType":"scalar","result":)", deep,
                            "}}"))
          .status();
  EXPECT_THAT(nested.message(), HasSubstr("found an array of 1 element"));
  EXPECT_LT(nested.message().size(), 200u);
}

// A range query's evaluation as Prometheus 2.x answers /api/v1/query_range: one series whose
// value at time t (whole seconds) is t mod 1000, with no sample where t is a multiple of 7 and
// NaN where it is a multiple of 11; each request's start, end and step recorded.
class RangePrometheus {
 public:
  RangePrometheus() {
    server_ = std::make_unique<testing::LocalHttpServer>([this](httplib::Server& s) {
      s.Get("/api/v1/query_range", [this](const httplib::Request& req, httplib::Response& res) {
        const std::string q = req.get_param_value("query");
        double start = 0, end = 0, step = 0;
        if (!absl::SimpleAtod(req.get_param_value("start"), &start) ||
            !absl::SimpleAtod(req.get_param_value("end"), &end) ||
            !absl::SimpleAtod(req.get_param_value("step"), &step) || step <= 0 ||
            (end - start) / step + 1 > 11000) {
          res.status = 400;
          res.set_content(
              R"json({"status":"error","errorType":"bad_data","error":"exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"})json",
              "application/json");
          return;
        }
        {
          std::lock_guard<std::mutex> l(mu_);
          requests_.push_back(absl::StrCat(req.get_param_value("start"), " ",
                                           req.get_param_value("end"), " ",
                                           req.get_param_value("step")));
        }
        if (q == "none") {
          res.set_content(R"({"status":"success","data":{"resultType":"matrix","result":[]}})",
                          "application/json");
          return;
        }
        if (q == "down") {
          res.status = 503;
          res.set_content(R"({"status":"error","errorType":"unavailable","error":"no store"})",
                          "application/json");
          return;
        }
        std::string values;
        for (double t = start; t <= end + 1e-9; t += step) {
          const int64_t whole = static_cast<int64_t>(t);
          if (whole % 7 == 0) continue;
          absl::StrAppend(&values, values.empty() ? "" : ",", "[", absl::StrFormat("%.3f", t),
                          whole % 11 == 0 ? ",\"NaN\"]" : absl::StrCat(",\"", whole % 1000, "\"]"));
        }
        std::string series = absl::StrCat(R"({"metric":{},"values":[)", values, "]}");
        res.set_content(
            absl::StrCat(R"({"status":"success","data":{"resultType":"matrix","result":[)", series,
                         q == "two" ? "," + series : "", "]}}"),
            "application/json");
      });
    });
  }
  std::string url() const { return server_->url(); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> requests_;
  std::unique_ptr<testing::LocalHttpServer> server_;
};

TEST(PromClient, RangeQueriesInRequestsPrometheusAcceptsWithGapsAndNaNKept) {
  RangePrometheus fake;
  PromClient prom(Plain(fake.url()));
  const absl::Time start = absl::FromUnixSeconds(1764700000);
  // 25,000 steps of 5 s: three requests of at most 10,000 (Prometheus refuses over 11,000).
  absl::StatusOr<PromSeries> got = prom.QueryRange("load", start, absl::Seconds(5), 25000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(fake.requests(), (std::vector<std::string>{"1764700000.000 1764749995.000 5.000",
                                                       "1764750000.000 1764799995.000 5.000",
                                                       "1764800000.000 1764824995.000 5.000"}));
  ASSERT_EQ(got->points.size(), 25000u);
  EXPECT_EQ(got->start, start);
  EXPECT_EQ(got->step, absl::Seconds(5));
  int absent = 0, nan = 0;
  for (size_t k = 0; k < got->points.size(); ++k) {
    const int64_t t = 1764700000 + 5 * static_cast<int64_t>(k);
    const std::optional<double>& p = got->points[k];
    if (t % 7 == 0) {
      EXPECT_FALSE(p.has_value()) << k;
      ++absent;
    } else if (t % 11 == 0) {
      ASSERT_TRUE(p.has_value()) << k;
      EXPECT_TRUE(std::isnan(*p)) << k;
      ++nan;
    } else {
      ASSERT_TRUE(p.has_value()) << k;
      EXPECT_EQ(*p, static_cast<double>(t % 1000)) << k;
    }
  }
  EXPECT_GT(absent, 3000);
  EXPECT_GT(nan, 1500);

  // Sub-second steps and starts are kept to milliseconds, as Prometheus keeps them.
  got = prom.QueryRange("load", start + absl::Microseconds(250500), absl::Microseconds(250900), 8);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(fake.requests().back(), "1764700000.250 1764700002.000 0.250");
  EXPECT_EQ(got->step, absl::Milliseconds(250));

  // No series at all: every step absent. Several: aggregate. Prometheus' errors as for instant
  // queries.
  got = prom.QueryRange("none", start, absl::Seconds(5), 10);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->points, std::vector<std::optional<double>>(10));
  EXPECT_THAT(prom.QueryRange("two", start, absl::Seconds(5), 10).status().message(),
              HasSubstr("aggregate"));
  EXPECT_EQ(prom.QueryRange("down", start, absl::Seconds(5), 10).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(prom.QueryRange("load", start, absl::ZeroDuration(), 10).status().code(),
            absl::StatusCode::kInvalidArgument);
  got = prom.QueryRange("load", start, absl::Seconds(5), 0);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->points.empty());
  PromClient nobody(Plain("http://127.0.0.1:1"));
  EXPECT_THAT(nobody.QueryRange("load", start, absl::Seconds(5), 10).status().message(),
              HasSubstr("http://127.0.0.1:1/api/v1/query_range: "));
}

// A range query that Prometheus is slow to answer (a month of a heavy query) stops once the
// caller cancels it, within about a second instead of at its timeout; one cancelled before it
// starts sends nothing.
TEST(PromClient, ACancelledRangeQueryStopsWithoutWaitingForItsTimeout) {
  std::atomic<int> asked{0};
  std::atomic<bool> release{false};
  testing::LocalHttpServer server([&](httplib::Server& s) {
    s.Get("/api/v1/query_range", testing::SlowEmptyRange(asked, release));
  });
  PromConfig config = Plain(server.url());
  config.range_timeout_ms = 60000;
  PromClient prom(config);
  const absl::Time start = absl::FromUnixSeconds(1764700000);
  std::atomic<bool> cancel{true};
  absl::StatusOr<PromSeries> got = prom.QueryRange("load", start, absl::Seconds(5), 10, &cancel);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kCancelled) << got.status();
  EXPECT_EQ(asked.load(), 0);

  cancel = false;
  std::thread canceller([&] {
    while (asked.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  const auto began = std::chrono::steady_clock::now();
  got = prom.QueryRange("load", start, absl::Seconds(5), 10, &cancel);
  const auto took = std::chrono::steady_clock::now() - began;
  canceller.join();
  release = true;
  EXPECT_EQ(got.status().code(), absl::StatusCode::kCancelled) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("/api/v1/query_range"));
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_EQ(asked.load(), 1);
}

TEST(PromClient, ParsesOddRangeBodies) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  auto parse = [&](const char* body) {
    return ParsePromRangeResponse(200, body, start, absl::Seconds(10), 3);
  };
  // An instant vector where a matrix belongs, a sample off the steps asked for, one beyond them.
  EXPECT_THAT(parse(R"({"status":"success","data":{"resultType":"vector","result":[]}})")
                  .status()
                  .message(),
              HasSubstr("matrix"));
  EXPECT_THAT(
      parse(
          R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1005,"1"]]}]}})")
          .status()
          .message(),
      HasSubstr("not a step"));
  EXPECT_EQ(
      parse(
          R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1030,"1"]]}]}})")
          .status()
          .code(),
      absl::StatusCode::kInternal);
  EXPECT_EQ(
      parse(
          R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":"x"}]}})")
          .status()
          .code(),
      absl::StatusCode::kInternal);
  absl::StatusOr<std::vector<std::optional<double>>> ok = parse(
      R"({"status":"success","data":{"resultType":"matrix","result":[{"metric":{"job":"x"},"values":[[1000,"4"],[1020,"+Inf"]]}]}})");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[0], 4);
  EXPECT_FALSE((*ok)[1].has_value());
  EXPECT_TRUE(std::isinf(*(*ok)[2]));
  EXPECT_EQ(
      ParsePromRangeResponse(400, R"({"status":"error","errorType":"bad_data","error":"bad"})",
                             start, absl::Seconds(10), 3)
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

// A Prometheus behind authentication: what each query carried, answered with 17.
class Recorder {
 public:
  void Serve(httplib::Server& s) {
    s.Get("/api/v1/query", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      auth_ = req.get_header_value("Authorization");
      tenant_ = req.get_header_value("X-Scope-OrgID");
      res.set_content(kSeventeen, "application/json");
    });
    s.Get("/api/v1/query_range", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      auth_ = "range " + req.get_header_value("Authorization");
      tenant_ = req.get_header_value("X-Scope-OrgID");
      res.set_content(R"({"status":"success","data":{"resultType":"matrix","result":[]}})",
                      "application/json");
    });
  }
  std::string auth() {
    std::lock_guard<std::mutex> l(mu_);
    return auth_;
  }
  std::string tenant() {
    std::lock_guard<std::mutex> l(mu_);
    return tenant_;
  }

 private:
  std::mutex mu_;
  std::string auth_, tenant_;
};

TEST(PromClient, CredentialsFromFilesReadBeforeEveryQueryAndExtraHeaders) {
  Recorder seen;
  testing::LocalHttpServer prom([&](httplib::Server& s) { seen.Serve(s); });
  testing::ScratchDir scratch("prom");
  const std::string& dir = scratch.path();
  const std::string token = dir + "/token";
  std::ofstream(token) << "token-1\n";

  PromConfig c = Plain(prom.url());
  c.bearer_token_file = token;
  c.headers = {"X-Scope-OrgID: team-a"};
  PromClient client(c);
  ASSERT_TRUE(client.Query("up").ok());
  EXPECT_EQ(seen.auth(), "Bearer token-1");  // the file's trailing newline is not sent
  EXPECT_EQ(seen.tenant(), "team-a");
  // A rotated token (a projected service-account token is rewritten in place) is used at once.
  std::ofstream(token) << "token-2";
  ASSERT_TRUE(client.Query("up").ok());
  EXPECT_EQ(seen.auth(), "Bearer token-2");
  // Range queries carry the same.
  ASSERT_TRUE(client.QueryRange("up", absl::FromUnixSeconds(1000), absl::Seconds(5), 3).ok());
  EXPECT_EQ(seen.auth(), "range Bearer token-2");
  EXPECT_EQ(seen.tenant(), "team-a");
  // Gone: the query is not sent; the error names the file, never a token.
  std::filesystem::remove(token);
  absl::Status gone = client.Query("up").status();
  EXPECT_EQ(gone.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(gone.message(), HasSubstr(token));
  EXPECT_THAT(gone.message(), Not(HasSubstr("token-2")));

  const std::string password = dir + "/password";
  std::ofstream(password) << "s3cret\n";
  PromConfig b = Plain(prom.url());
  b.basic_username = "tessera";
  b.basic_password_file = password;
  ASSERT_TRUE(PromClient(b).Query("up").ok());
  EXPECT_EQ(seen.auth(), "Basic dGVzc2VyYTpzM2NyZXQ=");  // base64("tessera:s3cret")
  EXPECT_EQ(seen.tenant(), "");
  std::ofstream(password) << "";
  EXPECT_THAT(PromClient(b).Query("up").status().message(), HasSubstr("is empty"));
}

TEST(PromClient, HttpsWithAPrivateCaAndAClientCertificate) {
  testing::TestCerts pki;
  ASSERT_TRUE(pki.ok()) << pki.error();
  // Requires a client certificate signed by the CA.
  Recorder seen;
  testing::LocalHttpsServer https([&](httplib::SSLServer& s) { seen.Serve(s); },
                                  pki.server_cert().c_str(), pki.server_key().c_str(),
                                  pki.ca().c_str());
  ASSERT_TRUE(https.valid());

  PromConfig c = Plain(https.url());
  c.timeout_ms = 5000;
  c.tls.ca_file = pki.ca();
  c.tls.client_cert_file = pki.client_cert();
  c.tls.client_key_file = pki.client_key();
  absl::StatusOr<PromValue> v = PromClient(c).Query("up");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->value, 17);

  PromConfig untrusted = c;  // the system's CAs do not know the private one
  untrusted.tls.ca_file = pki.other_ca();
  EXPECT_EQ(PromClient(untrusted).Query("up").status().code(), absl::StatusCode::kUnavailable);
  PromConfig anonymous = c;  // no client certificate: the server refuses the handshake
  anonymous.tls.client_cert_file.clear();
  anonymous.tls.client_key_file.clear();
  EXPECT_EQ(PromClient(anonymous).Query("up").status().code(), absl::StatusCode::kUnavailable);
  PromConfig skip = untrusted;  // insecureSkipVerify: the server is not checked
  skip.tls.insecure_skip_verify = true;
  EXPECT_TRUE(PromClient(skip).Query("up").ok());
}

// Amazon Managed Service for Prometheus: a workspace's query URL, every request signed with
// SigV4 for "aps". The signature is checked against curl's own SigV4 signer (--aws-sigv4) over
// the same request, date and credentials.
TEST(PromClient, SigV4ForAmazonManagedPrometheusAgreesWithCurlsSigner) {
  std::mutex mu;
  std::vector<std::pair<std::string, httplib::Headers>> seen;
  int refuse = 0;  // answer this many more queries with 403, as AMP does to expired credentials
  auto record = [&](const httplib::Request& req, httplib::Response& res, const char* body) {
    std::lock_guard<std::mutex> l(mu);
    seen.emplace_back(req.target, req.headers);
    if (refuse > 0) {
      --refuse;
      res.status = 403;
      res.set_content(R"({"message":"The security token included in the request is expired"})",
                      "application/json");
      return;
    }
    res.set_content(body, "application/json");
  };
  testing::LocalHttpServer amp([&](httplib::Server& s) {
    s.Get(
        "/workspaces/ws-1/api/v1/query",
        [&](const httplib::Request& req, httplib::Response& res) { record(req, res, kSeventeen); });
    s.Get("/workspaces/ws-1/api/v1/query_range",
          [&](const httplib::Request& req, httplib::Response& res) {
            record(req, res, R"({"status":"success","data":{"resultType":"matrix","result":[]}})");
          });
  });
  auto last = [&] {
    std::lock_guard<std::mutex> l(mu);
    return seen.back();
  };
  auto header = [](const httplib::Headers& h, const std::string& name) {
    auto it = h.find(name);
    return it == h.end() ? std::string() : it->second;
  };
  testing::FakeEnvironment() = {{"AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"},
                                {"AWS_SECRET_ACCESS_KEY", "se/cret+key"},
                                {"AWS_SESSION_TOKEN", "tok/en+1"}};
  PromConfig c = Plain(amp.url("/workspaces/ws-1"));
  c.sigv4_region = "us-west-2";
  c.getenv_fn = testing::FakeGetenv;
  SimulatedClock clock(absl::FromUnixSeconds(1796968000));  // 2026-12-11T05:46:40Z
  PromClient client(c, &clock);
  absl::StatusOr<PromValue> v =
      client.Query(R"(sum(vllm:num_requests_waiting{model_name="chat small"}))");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->value, 17);
  const auto [target, headers] = last();
  EXPECT_EQ(header(headers, "X-Amz-Date"), "20261211T054640Z");
  EXPECT_EQ(header(headers, "X-Amz-Security-Token"), "tok/en+1");
  const std::string ours = header(headers, "Authorization");
  EXPECT_THAT(ours, HasSubstr("Credential=AKIDEXAMPLE/20261211/us-west-2/aps/aws4_request"));

  // curl signs the same request with the same date (it keeps a given X-Amz-Date).
  const std::string cmd = absl::StrCat(
      "curl -sf -o /dev/null --aws-sigv4 aws:amz:us-west-2:aps --user 'AKIDEXAMPLE:se/cret+key' "
      "-H 'X-Amz-Date: 20261211T054640Z' -H 'x-amz-content-sha256: ",
      header(headers, "X-Amz-Content-Sha256"), "' -H 'x-amz-security-token: tok/en+1' '",
      amp.url(target), "'");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string theirs = header(last().second, "Authorization");
  ASSERT_NE(ours.find("Signature="), std::string::npos) << ours;
  EXPECT_THAT(theirs, HasSubstr(ours.substr(ours.find("Signature="))))
      << "curl: " << theirs << "\nours: " << ours;
  EXPECT_THAT(theirs, HasSubstr("SignedHeaders=host;x-amz-content-sha256;x-amz-date;"
                                "x-amz-security-token"));

  // Range queries are signed too, dated by the clock.
  clock.Advance(absl::Minutes(1));
  ASSERT_TRUE(client.QueryRange("up", absl::FromUnixSeconds(1000), absl::Seconds(5), 3).ok());
  EXPECT_EQ(header(last().second, "X-Amz-Date"), "20261211T054740Z");
  EXPECT_THAT(header(last().second, "Authorization"), HasSubstr("/us-west-2/aps/aws4_request"));

  // No credentials anywhere: nothing is sent, and the error says where they were looked for.
  testing::FakeEnvironment().clear();
  const size_t sent = seen.size();
  absl::Status none = client.Query("up").status();
  EXPECT_EQ(none.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(none.message(), HasSubstr("prometheus.sigv4: no AWS credentials"));
  EXPECT_THAT(none.message(), HasSubstr("AWS_WEB_IDENTITY_TOKEN_FILE"));
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(seen.size(), sent);
  }

  // EKS Pod Identity: the agent is asked once, not per query; a 403 from the workspace makes
  // the next query ask it again.
  int asked = 0;
  testing::LocalHttpServer agent([&](httplib::Server& s) {
    s.Get("/v1/credentials", [&](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu);
      ++asked;
      res.set_content(absl::StrCat(R"({"AccessKeyId": "ASIAPOD)", asked,
                                   R"(", "SecretAccessKey": "p", "Token": "t",)",
                                   R"( "Expiration": "2026-12-11T11:46:40Z"})"),
                      "application/json");
    });
  });
  testing::FakeEnvironment() = {
      {"AWS_CONTAINER_CREDENTIALS_FULL_URI", agent.url("/v1/credentials")}};
  auto agent_answers = [&] {
    std::lock_guard<std::mutex> l(mu);
    return asked;
  };
  for (int i = 0; i < 5; ++i) {
    clock.Advance(absl::Seconds(5));
    ASSERT_TRUE(client.Query("up").ok());
  }
  EXPECT_EQ(agent_answers(), 1);
  EXPECT_THAT(header(last().second, "Authorization"), HasSubstr("Credential=ASIAPOD1/"));
  {
    std::lock_guard<std::mutex> l(mu);
    refuse = 1;
  }
  absl::Status refused = client.Query("up").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("403"));
  ASSERT_TRUE(client.Query("up").ok());
  EXPECT_EQ(agent_answers(), 2);
  EXPECT_THAT(header(last().second, "Authorization"), HasSubstr("Credential=ASIAPOD2/"));
  testing::FakeEnvironment().clear();
}

// Google Cloud Managed Service for Prometheus with GKE Workload Identity: a bearer token from
// the metadata server, asked for once for many queries and again after a 401.
TEST(PromClient, BearerTokenFromTheCloudIdentityKeptAndRenewedOnRefusal) {
  std::mutex mu;
  int issued = 0;
  std::string auth;
  bool refuse = false;
  testing::LocalHttpServer metadata([&](httplib::Server& s) {
    s.Get("/computeMetadata/v1/instance/service-accounts/default/token",
          [&](const httplib::Request&, httplib::Response& res) {
            std::lock_guard<std::mutex> l(mu);
            ++issued;
            res.set_content(absl::StrCat(R"({"access_token":"ya29.t)", issued,
                                         R"(","expires_in":3599,"token_type":"Bearer"})"),
                            "application/json");
          });
  });
  testing::LocalHttpServer gmp([&](httplib::Server& s) {
    s.Get("/v1/projects/p/location/global/prometheus/api/v1/query",
          [&](const httplib::Request& req, httplib::Response& res) {
            std::lock_guard<std::mutex> l(mu);
            auth = req.get_header_value("Authorization");
            if (refuse) {
              refuse = false;
              res.status = 401;
              return;
            }
            res.set_content(kSeventeen, "application/json");
          });
  });
  auto seen = [&] {
    std::lock_guard<std::mutex> l(mu);
    return absl::StrCat(issued, " ", auth);
  };
  testing::FakeEnvironment() = {{"GCE_METADATA_HOST", absl::StrCat("127.0.0.1:", metadata.port())}};
  PromConfig c = Plain(gmp.url("/v1/projects/p/location/global/prometheus"));
  c.cloud_identity = CloudIdentity::kGoogle;
  c.getenv_fn = testing::FakeGetenv;
  SimulatedClock clock(absl::FromUnixSeconds(1796968000));
  PromClient client(c, &clock);
  EXPECT_EQ(client.CloudCredentialsField(), "prometheus.googleWorkloadIdentity");
  // Asked for at start (what `tessera scaler` does) through the queries' own cache: the ten
  // queries below are sent with that same token, fetched once.
  absl::StatusOr<PromClient::CloudCredentials> at_start = client.CurrentCloudCredentials();
  ASSERT_TRUE(at_start.ok()) << at_start.status();
  EXPECT_EQ(at_start->source,
            absl::StrCat("the GKE metadata server at 127.0.0.1:", metadata.port()));
  EXPECT_EQ(at_start->expiration, clock.Now() + absl::Seconds(3599));
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(client.Query("up").ok());
    clock.Advance(absl::Seconds(5));
  }
  EXPECT_EQ(seen(), "1 Bearer ya29.t1");
  {
    std::lock_guard<std::mutex> l(mu);
    refuse = true;
  }
  EXPECT_THAT(client.Query("up").status().message(), HasSubstr("HTTP 401"));
  ASSERT_TRUE(client.Query("up").ok());
  EXPECT_EQ(seen(), "2 Bearer ya29.t2");
  // No metadata server: the query is not sent, and the error names the field and the server.
  metadata.Stop();
  client.Query("up").IgnoreError();  // (the kept token still serves: no refusal has dropped it)
  {
    std::lock_guard<std::mutex> l(mu);
    refuse = true;
  }
  client.Query("up").IgnoreError();  // 401: dropped
  absl::Status none = client.Query("up").status();
  EXPECT_EQ(none.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(none.message(),
              HasSubstr("prometheus.googleWorkloadIdentity: the GKE metadata server at"));
  testing::FakeEnvironment().clear();
}

}  // namespace
}  // namespace tessera::adapters
