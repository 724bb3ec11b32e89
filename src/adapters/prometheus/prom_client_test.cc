// Every outcome of a PromQL instant query, against a local HTTP server that answers as
// Prometheus does (bodies in the shape of Prometheus 2.x's /api/v1/query).
#include "adapters/prometheus/prom_client.h"

#include <httplib.h>

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;

class FakePrometheus {
 public:
  FakePrometheus() {
    server_.Get("/api/v1/query", [this](const httplib::Request& req, httplib::Response& res) {
      std::string q = req.get_param_value("query");
      last_query_ = q;
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
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakePrometheus() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string last_query_;

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::map<std::string, std::pair<int, std::string>> answers_;
};

TEST(PromClient, EveryOutcome) {
  FakePrometheus fake;
  PromClient prom({.url = fake.url(), .timeout_ms = 500, .bearer_token = ""});
  absl::StatusOr<PromValue> v = prom.Query("one");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->value, 17);
  EXPECT_FALSE(v->empty);
  EXPECT_EQ(absl::ToUnixMillis(v->sampled), 1764700000123);

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
  EXPECT_EQ(fake.last_query_, "sum(");  // the query arrived URL-decoded intact

  EXPECT_EQ(prom.Query("timeout").status().code(), absl::StatusCode::kUnavailable);
  absl::Status gw = prom.Query("gateway").status();
  EXPECT_EQ(gw.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(gw.message(), HasSubstr("HTTP 502"));

  absl::Status slow = prom.Query("slow").status();
  EXPECT_EQ(slow.code(), absl::StatusCode::kDeadlineExceeded) << slow;

  PromClient nobody({.url = "http://127.0.0.1:1", .timeout_ms = 500, .bearer_token = ""});
  EXPECT_EQ(nobody.Query("one").status().code(), absl::StatusCode::kUnavailable);
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
}

}  // namespace
}  // namespace tessera::adapters
