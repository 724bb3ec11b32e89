#include "adapters/http/server.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "adapters/net/http_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

TEST(HttpRequestParser, IncrementalCompleteAndMalformed) {
  HttpCall c;
  std::string req =
      "POST /v1/models/ab%20c?wait=1.5&x=a+b HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody";
  for (size_t n = 0; n < req.size(); ++n) {
    absl::StatusOr<bool> r = ParseHttpRequest(req.substr(0, n), &c);
    ASSERT_TRUE(r.ok()) << n;
    EXPECT_FALSE(*r) << n;  // never complete before the last byte
  }
  absl::StatusOr<bool> r = ParseHttpRequest(req, &c);
  ASSERT_TRUE(r.ok() && *r);
  EXPECT_EQ(c.method, "POST");
  EXPECT_EQ(c.path, "/v1/models/ab c");
  EXPECT_EQ(c.query["wait"], "1.5");
  EXPECT_EQ(c.query["x"], "a b");
  EXPECT_EQ(c.headers["host"], "x");
  EXPECT_EQ(c.body, "body");
  EXPECT_EQ(ParseHttpRequest("GET nope HTTP/1.1\r\n\r\n", &c).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseHttpRequest("GET /%zz HTTP/1.1\r\n\r\n", &c).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseHttpRequest("GET /%4 HTTP/1.1\r\n\r\n", &c).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseHttpRequest("POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n", &c, 1024)
                .status()
                .code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(
      ParseHttpRequest("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &c).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ParseHttpRequest(std::string(70000, 'a'), &c).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST(HttpServer, ServesAUnixSocketAndTcpAndAnswers100Continue) {
  HttpServer server([](const HttpCall& c) {
    return HttpReply{200, "text/plain", absl::StrCat(c.method, " ", c.path, " ", c.body.size())};
  });
  std::string sock = absl::StrCat("/tmp/tessera-http-test-", getpid(), ".sock");
  ASSERT_TRUE(server.Listen("unix://" + sock).ok());
  ASSERT_TRUE(server.Listen("127.0.0.1:0").ok());
  EXPECT_FALSE(server.Listen("unix://relative.sock").ok());
  EXPECT_FALSE(server.Listen("nohostport").ok());
  HttpRequest req;
  req.method = "POST";
  req.url = "http://agent/x";
  req.unix_socket = sock;
  req.body = std::string(5000, 'b');
  req.headers = {"Expect: 100-continue"};
  absl::Time t0 = absl::Now();
  absl::StatusOr<HttpResponse> r = Fetch(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "POST /x 5000");
  // Without the interim 100 the client would wait a second before sending the body.
  EXPECT_LT(absl::Now() - t0, absl::Milliseconds(500));
  HttpRequest tcp;
  tcp.url = absl::StrCat("http://127.0.0.1:", server.port(), "/y");
  r = Fetch(tcp);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, "GET /y 0");
  tcp.url = absl::StrCat("http://127.0.0.1:", server.port(), "/%zz");
  r = Fetch(tcp);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400);
  server.Stop();
  EXPECT_NE(access(sock.c_str(), F_OK), 0);  // the socket file is removed
}

}  // namespace
}  // namespace tessera::adapters
