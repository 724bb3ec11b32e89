// Test helper: a cpp-httplib server (http, or https with LocalHttpsServer) on a free 127.0.0.1
// port, serving on its own thread from construction until Stop() or destruction, so a failed
// assertion never leaves a thread running.
//
// Example:
//   LocalHttpServer origin([](httplib::Server& s) {
//     s.Get("/x", [](const httplib::Request&, httplib::Response& res) { res.set_content("hi",
//     "text/plain"); });
//   });
//   Fetch({.url = origin.url("/x")});
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tessera::adapters::testing {

// S is httplib::Server, or httplib::SSLServer for https (its constructor's arguments follow the
// routes: certificate, key and, to require client certificates, the CA that signs them).
template <typename S>
class LocalServer {
 public:
  template <typename... ServerArgs>
  explicit LocalServer(const std::function<void(S&)>& routes, ServerArgs&&... server_args)
      : server_(std::forward<ServerArgs>(server_args)...) {
    if (!server_.is_valid()) return;  // unreadable certificates: valid() says so, nothing serves
    routes(server_);
    // One request per connection: the client keeps its connection between requests (one curl
    // handle per thread), and an idle kept connection holds stop() for httplib's 5 s keep-alive.
    server_.set_keep_alive_max_count(1);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~LocalServer() { Stop(); }
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;

  bool valid() const { return server_.is_valid(); }
  void Stop() {
    if (!thread_.joinable()) return;
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  std::string url(absl::string_view path = "") const {
    constexpr bool kHttps = !std::is_same_v<S, httplib::Server>;
    return absl::StrCat(kHttps ? "https" : "http", "://127.0.0.1:", port_, path);
  }

 private:
  S server_;
  std::thread thread_;
  int port_ = 0;
};

using LocalHttpServer = LocalServer<httplib::Server>;
using LocalHttpsServer = LocalServer<httplib::SSLServer>;

}  // namespace tessera::adapters::testing
