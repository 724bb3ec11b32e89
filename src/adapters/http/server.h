// A small HTTP/1.1 server for Tessera's local control APIs (the node agent's API on a Unix
// socket and, optionally, TCP). One thread per connection (bounded), one request per connection
// (`Connection: close`), bodies by Content-Length only (chunked requests are refused with 411).
// cpp-httplib 0.11 (Debian 12) cannot listen on a Unix socket, hence this.
//
// Example:
//   HttpServer s([](const HttpCall& c) { return HttpReply{200, "text/plain", "ok\n"}; });
//   TESSERA_RETURN_IF_ERROR(s.Listen("unix:///run/tessera/agent.sock"));
//   s.Stop();  // joins every connection thread
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::adapters {

struct HttpCall {
  std::string method;
  std::string path;  // without the query, percent-decoded
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

// Parses one request from the bytes received so far. Returns false with `*need_more` when the
// request is not complete yet; an error status (InvalidArgument; OutOfRange for a body or header
// over the limits) when the bytes can never make a valid request.
absl::StatusOr<bool> ParseHttpRequest(const std::string& bytes, HttpCall* call,
                                      size_t max_body = 1 << 20);

class HttpServer {
 public:
  using Handler = std::function<HttpReply(const HttpCall&)>;
  explicit HttpServer(Handler handler, int max_connections = 256);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // "unix:///abs/path" (an existing socket file is replaced; mode 0660) or "HOST:PORT"
  // (PORT 0 picks a free one). Starts an accept thread; may be called for several addresses.
  absl::Status Listen(const std::string& address);
  // The TCP port of the last Listen on HOST:PORT.
  int port() const { return port_; }
  // Stops accepting, waits for the connections in flight, removes the socket files.
  void Stop();

 private:
  void AcceptLoop(int fd);
  void Serve(int fd);

  Handler handler_;
  int max_connections_;
  std::atomic<bool> stopping_{false};
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable idle_;
  int active_ = 0;
  std::vector<int> listen_fds_;
  std::vector<std::string> socket_files_;
  std::vector<std::thread> acceptors_;
};

}  // namespace tessera::adapters
