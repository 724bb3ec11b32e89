#include "cmd/metrics_endpoint.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::cmd {

MetricsEndpoint::MetricsEndpoint(std::function<std::string()> text, std::function<bool()> ready,
                                 Pages pages)
    : server_([text = std::move(text), ready = std::move(ready),
               pages = std::move(pages)](const adapters::HttpCall& call) {
        if (call.method == "GET" && call.path == "/metrics") {
          return adapters::HttpReply{200, "text/plain; version=0.0.4; charset=utf-8", text()};
        }
        if (ready && call.method == "GET" && call.path == "/readyz") {
          return ready() ? adapters::HttpReply{200, "text/plain", "ok\n"}
                         : adapters::HttpReply{503, "text/plain", "not serving\n"};
        }
        if (auto page = pages.find(call.path); call.method == "GET" && page != pages.end()) {
          return adapters::HttpReply{200, "text/plain; charset=utf-8", page->second()};
        }
        std::vector<std::string> paths = {"/metrics"};
        if (ready) paths.emplace_back("/readyz");
        for (const auto& [path, page] : pages) paths.push_back(path);
        return adapters::HttpReply{
            404, "text/plain", absl::StrCat("only GET ", absl::StrJoin(paths, ", "), " here\n")};
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
