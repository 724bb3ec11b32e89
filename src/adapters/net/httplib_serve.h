// Runs a cpp-httplib server (HTTP or HTTPS) on host:port until *stop: port 0 takes any free
// port, stored in *bound_port (optional) once listening.
//
// Example:
//   httplib::Server server;  server.Get("/healthz", ...);
//   absl::Status s = ServeUntilStopped(server, "0.0.0.0", 8443, &stop, &bound);
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera::adapters {

inline absl::Status ServeUntilStopped(httplib::Server& server, const std::string& host, int port,
                                      const std::atomic<bool>* stop, std::atomic<int>* bound_port) {
  int bound = port == 0 ? server.bind_to_any_port(host.c_str())
                        : (server.bind_to_port(host.c_str(), port) ? port : -1);
  if (bound < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port));
  }
  if (bound_port != nullptr) {
    bound_port->store(bound);
  }
  std::thread listener([&server] { server.listen_after_bind(); });
  while (!stop->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  server.stop();
  listener.join();
  return absl::OkStatus();
}

}  // namespace tessera::adapters
