#include "cmd/node_agent_command.h"

#include <unistd.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "adapters/http/server.h"
#include "base/units.h"
#include "cmd/signals.h"
#include "services/node_agent.h"

namespace tessera::cmd {
namespace {
int Fail(int code, const std::string& message) {
  std::cerr << "tessera node-agent: " << message << "\n";
  return code;
}
}  // namespace

int RunNodeAgent(const NodeAgentFlags& f) {
  services::NodeAgentOptions o;
  o.cache_dir = f.cache_dir;
  absl::StatusOr<int64_t> max = ParseBytes(f.max_bytes);
  if (!max.ok() || *max <= 0) {
    return Fail(1, absl::StrCat("--max-bytes ", f.max_bytes, ": expected a size such as 500Gi"));
  }
  o.max_bytes = *max;
  absl::StatusOr<int64_t> chunk = ParseBytes(f.chunk_size);
  if (!chunk.ok() || *chunk < (64 << 10) || *chunk > (int64_t{1} << 30)) {
    return Fail(1, absl::StrCat("--chunk-size ", f.chunk_size, ": expected 64Ki to 1Gi"));
  }
  if (f.connections < 1 || f.connections > 256) return Fail(1, "--connections: expected 1 to 256");
  if (!absl::ParseDuration(f.lease_ttl, &o.default_lease_ttl) ||
      o.default_lease_ttl <= absl::ZeroDuration() || o.default_lease_ttl > services::kMaxLeaseTtl) {
    return Fail(
        1, absl::StrCat("--lease-ttl ", f.lease_ttl, ": expected a duration above 0 and at most ",
                        absl::FormatDuration(services::kMaxLeaseTtl)));
  }
  o.fetch.connections = f.connections;
  o.fetch.chunk_bytes = *chunk;
  if (f.listen.empty() && f.listen_http.empty()) {
    return Fail(1, "--listen unix:///PATH (or --listen-http HOST:PORT) is required");
  }
  std::atomic<bool>& stop = StopOnSignal();
  absl::StatusOr<std::unique_ptr<services::NodeAgent>> agent = services::NodeAgent::Open(o);
  if (!agent.ok()) return Fail(2, std::string(agent.status().message()));
  for (const std::string& w : (*agent)->warnings())
    std::cerr << "tessera node-agent: " << w << "\n";
  adapters::HttpServer server([&](const adapters::HttpCall& c) { return (*agent)->Handle(c); });
  for (const std::string& l : f.listen) {
    if (l.rfind("unix://", 0) != 0) {
      return Fail(1, absl::StrCat("--listen ", l, ": expected unix:///PATH (TCP: --listen-http)"));
    }
    if (absl::Status s = server.Listen(l); !s.ok()) return Fail(2, std::string(s.message()));
  }
  if (!f.listen_http.empty()) {
    if (absl::Status s = server.Listen(f.listen_http); !s.ok()) {
      return Fail(2, std::string(s.message()));
    }
  }
  // One write, so a reader waiting for the line never sees half of it.
  std::string ready = absl::StrCat("tessera node-agent: cache ", f.cache_dir, ", budget ",
                                   f.max_bytes, ", serving");
  for (const std::string& l : f.listen) absl::StrAppend(&ready, " ", l);
  if (!f.listen_http.empty()) {
    absl::StrAppend(&ready, " http://", f.listen_http, " (port ", server.port(), ")");
  }
  std::cerr << ready + "\n" << std::flush;
  while (!stop) absl::SleepFor(absl::Milliseconds(100));
  server.Stop();
  agent->reset();  // cancels fills in flight; their verified chunks stay for the next start
  std::cerr << "tessera node-agent: stopped" << std::endl;
  return 0;
}

}  // namespace tessera::cmd
