#include "adapters/net/http_client.h"

#include <string>

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

}  // namespace
}  // namespace tessera::adapters
