// Test helper: a /api/v1/query_range handler for a Prometheus slow to answer (a month of a heavy
// query). It counts the requests in `asked` and answers an empty matrix only once `release` is
// set, or after 20 s, so that a server stopped at the end of a failed test still stops.
//
// Example:
//   std::atomic<int> asked{0};
//   std::atomic<bool> release{false};
//   testing::LocalHttpServer server([&](httplib::Server& s) {
//     s.Get("/api/v1/query_range", testing::SlowEmptyRange(asked, release));
//   });
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace tessera::adapters::testing {

inline httplib::Server::Handler SlowEmptyRange(std::atomic<int>& asked,
                                               const std::atomic<bool>& release) {
  return [&asked, &release](const httplib::Request&, httplib::Response& res) {
    ++asked;
    for (int i = 0; i < 2000 && !release.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    res.set_content(R"({"status":"success","data":{"resultType":"matrix","result":[]}})",
                    "application/json");
  };
}

}  // namespace tessera::adapters::testing
