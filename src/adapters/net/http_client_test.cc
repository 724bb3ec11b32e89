#include "adapters/net/http_client.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "adapters/net/test_http_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::adapters {
namespace {

using ::testing::HasSubstr;

// A body beyond max_response_bytes is an error, whether its length is announced
// (Content-Length) or not (chunked), and the transfer stops there.
TEST(Fetch, RefusesAResponseLargerThanTheBound) {
  const std::string body(4096, 'x');
  testing::LocalHttpServer server([&body](httplib::Server& s) {
    s.Get("/sized", [&body](const httplib::Request&, httplib::Response& res) {
      res.set_content(body, "text/plain");
    });
    s.Get("/chunked", [&body](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [&body](size_t, httplib::DataSink& sink) {
        for (int i = 0; i < 64; ++i) {
          if (!sink.write(body.data(), 64)) return false;
        }
        sink.done();
        return true;
      });
    });
  });
  for (const char* path : {"/sized", "/chunked"}) {
    HttpRequest req;
    req.url = server.url(path);
    absl::StatusOr<HttpResponse> r = Fetch(req);  // the default bound (64 MiB)
    ASSERT_TRUE(r.ok()) << path << ": " << r.status();
    EXPECT_EQ(r->body, body) << path;
    req.max_response_bytes = 4096;  // exactly the body: still fine
    r = Fetch(req);
    ASSERT_TRUE(r.ok()) << path << ": " << r.status();
    req.max_response_bytes = 1000;
    r = Fetch(req);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << path;
    EXPECT_THAT(r.status().message(),
                HasSubstr(absl::StrCat("GET ", req.url, ": response larger than 1000 bytes")));
  }
}

// Streaming (a watch): a 2xx body reaches on_data piece by piece, past max_response_bytes, and
// is not collected; another status's body is collected as usual; on_data returning false, or
// `cancel`, stops the request (Cancelled) without waiting for the body or the timeout.
TEST(Fetch, StreamsA2xxBodyAndStopsWhenAsked) {
  std::atomic<bool> serving{true};
  testing::LocalHttpServer server([&serving](httplib::Server& s) {
    s.Get("/stream", [&serving](const httplib::Request& req, httplib::Response& res) {
      const bool endless = req.has_param("endless");
      res.set_chunked_content_provider(
          "application/json", [endless, &serving](size_t offset, httplib::DataSink& sink) {
            if (!endless && offset >= 3000) {
              sink.done();
              return true;
            }
            if (endless && offset >= 3000) {  // then idle, as a quiet watch is
              std::this_thread::sleep_for(std::chrono::milliseconds(20));
              return serving.load();
            }
            return sink.write("0123456789\n", 11);
          });
    });
    s.Get("/denied", [](const httplib::Request&, httplib::Response& res) {
      res.status = 403;
      res.set_content(R"({"kind":"Status","message":"forbidden"})", "application/json");
    });
  });
  std::string got;
  HttpRequest req;
  req.url = server.url("/stream");
  req.max_response_bytes = 100;
  req.on_data = [&got](absl::string_view piece) {
    got.append(piece.data(), piece.size());
    return true;
  };
  absl::StatusOr<HttpResponse> r = Fetch(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "");
  EXPECT_GE(got.size(), 3000u);
  EXPECT_EQ(got.substr(0, 22), "0123456789\n0123456789\n");

  req.url = server.url("/denied");
  r = Fetch(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(r->body, R"({"kind":"Status","message":"forbidden"})");

  req.url = server.url("/stream");
  req.on_data = [](absl::string_view) { return false; };
  r = Fetch(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();

  std::atomic<bool> cancel{false};
  req.url = server.url("/stream?endless=1");
  req.on_data = [](absl::string_view) { return true; };
  req.cancel = &cancel;
  req.timeout_ms = 60000;
  std::thread stopper([&cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel = true;
  });
  auto start = std::chrono::steady_clock::now();
  r = Fetch(req);
  stopper.join();
  serving = false;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace tessera::adapters
