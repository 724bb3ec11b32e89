#include "cmd/metrics_endpoint.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera::cmd {

MetricsEndpoint::MetricsEndpoint(std::function<std::string()> text, std::function<bool()> ready)
    : server_([text = std::move(text), ready = std::move(ready)](const adapters::HttpCall& call) {
        if (call.method == "GET" && call.path == "/metrics") {
          return adapters::HttpReply{200, "text/plain; version=0.0.4; charset=utf-8", text()};
        }
        if (ready && call.method == "GET" && call.path == "/readyz") {
          return ready() ? adapters::HttpReply{200, "text/plain", "ok\n"}
                         : adapters::HttpReply{503, "text/plain", "not serving\n"};
        }
        return adapters::HttpReply{
            404, "text/plain",
            ready ? "only GET /metrics and /readyz here\n" : "only GET /metrics here\n"};
      }) {}

absl::Status MetricsEndpoint::Listen(const std::string& address) {
  if (address.empty()) return absl::OkStatus();
  if (absl::Status s = server_.Listen(address); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("--metrics-listen ", address, ": ", s.message()));
  }
  listening_ = true;
  return absl::OkStatus();
}

std::string MetricsEndpoint::Announcement() const {
  return listening_ ? absl::StrCat(", metrics on port ", server_.port()) : "";
}

}  // namespace tessera::cmd
