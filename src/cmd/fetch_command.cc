#include "cmd/fetch_command.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "adapters/net/http_client.h"
#include "adapters/objstore/fetcher.h"
#include "base/clock.h"
#include "base/units.h"
#include "cmd/signals.h"
#include "nlohmann/json.hpp"
#include "services/node_agent.h"

namespace tessera::cmd {
namespace {

int Fail(int code, const std::string& message) {
  std::cerr << "tessera fetch: " << message << "\n";
  return code;
}

std::string Mib(int64_t b) { return absl::StrFormat("%.1f MiB", b / 1048576.0); }

// Progress on stderr: a bar with rate and ETA on a terminal, a line per 10% otherwise.
void ShowProgress(bool tty, const adapters::objstore::FetchProgress& p) {
  double pct = p.bytes_total > 0 ? 100.0 * p.bytes_done / p.bytes_total : 100;
  double eta = p.bytes_per_second > 0 ? (p.bytes_total - p.bytes_done) / p.bytes_per_second : 0;
  if (tty) {
    int width = 30, filled = static_cast<int>(pct / 100 * width);
    std::fprintf(stderr, "\r[%s%s] %5.1f%% %s / %s  %.1f MiB/s  ETA %.0fs ",
                 std::string(filled, '#').c_str(), std::string(width - filled, ' ').c_str(), pct,
                 Mib(p.bytes_done).c_str(), Mib(p.bytes_total).c_str(),
                 p.bytes_per_second / 1048576.0, eta);
  } else {
    static int last_decile = -1;
    if (static_cast<int>(pct / 10) != last_decile) {
      last_decile = static_cast<int>(pct / 10);
      std::fprintf(stderr, "tessera fetch: %.0f%% %s of %s, %.1f MiB/s\n", pct,
                   Mib(p.bytes_done).c_str(), Mib(p.bytes_total).c_str(),
                   p.bytes_per_second / 1048576.0);
    }
  }
}

int WritePathFile(const std::string& file, const std::string& path) {
  if (file.empty()) return 0;
  std::string tmp = file + ".tmp";
  FILE* out = std::fopen(tmp.c_str(), "w");
  if (out == nullptr || std::fprintf(out, "%s", path.c_str()) < 0 || std::fclose(out) != 0 ||
      std::rename(tmp.c_str(), file.c_str()) != 0) {
    return Fail(2, absl::StrCat("--path-file ", file, ": cannot write it"));
  }
  return 0;
}

// One call to the agent's API.
absl::StatusOr<nlohmann::json> Call(const std::string& agent, const std::string& method,
                                    const std::string& path, const std::string& body, int* status) {
  adapters::HttpRequest req;
  req.method = method;
  req.body = body;
  req.timeout_ms = 60000;
  if (absl::StartsWith(agent, "unix://")) {
    req.unix_socket = agent.substr(7);
    req.url = "http://tessera-node-agent" + path;
  } else {
    req.url = agent + path;
  }
  if (!body.empty()) req.headers = {"Content-Type: application/json"};
  absl::StatusOr<adapters::HttpResponse> r = adapters::Fetch(req);
  if (!r.ok()) {
    return absl::UnavailableError(absl::StrCat("node agent ", agent, ": ", r.status().message()));
  }
  *status = static_cast<int>(r->status);
  if (r->body.empty()) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_discarded()) {
    return absl::InternalError(
        absl::StrCat("node agent ", agent, ": HTTP ", r->status, " with a body that is not JSON"));
  }
  return j;
}

int RunFetchViaAgent(const FetchFlags& f, absl::Duration timeout) {
  if (!absl::StartsWith(f.agent, "unix:///") && !absl::StartsWith(f.agent, "http://")) {
    return Fail(1,
                absl::StrCat("--agent ", f.agent, ": expected unix:///PATH or http://HOST:PORT"));
  }
  absl::Duration ttl;
  if (!absl::ParseDuration(f.lease_ttl, &ttl) || ttl < absl::Seconds(3) ||
      ttl > services::kMaxLeaseTtl) {
    return Fail(1, absl::StrCat("--lease-ttl ", f.lease_ttl, ": expected a duration from 3s to ",
                                absl::FormatDuration(services::kMaxLeaseTtl)));
  }
  std::string holder = f.holder;
  if (holder.empty() && std::getenv("POD_NAME") != nullptr) holder = std::getenv("POD_NAME");
  if (holder.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    holder = absl::StrCat(host, "-", getpid());
  }
  const bool tty = isatty(STDERR_FILENO) != 0;
  nlohmann::json req = {
      {"source", f.source},
      {"lease", {{"holder", holder}, {"ttlSeconds", absl::ToDoubleSeconds(ttl)}}}};
  int status = 0;
  absl::StatusOr<nlohmann::json> m = Call(f.agent, "POST", "/v1/models", req.dump(), &status);
  if (!m.ok()) return Fail(2, std::string(m.status().message()));
  if (status == 400) return Fail(1, m->value("error", "the agent refused the request"));
  if (status != 200 && status != 202) {
    return Fail(2, absl::StrCat("node agent: HTTP ", status, ": ", m->value("error", "")));
  }
  const std::string id = m->value("id", "");
  const RealClock clock;
  const absl::Time deadline = clock.Now() + timeout;
  std::atomic<bool>& stop = StopOnSignal();
  while (m->value("state", "") == "filling") {
    ShowProgress(tty, {.bytes_done = m->value("bytesDone", int64_t{0}),
                       .bytes_total = m->value("bytesTotal", int64_t{0}),
                       .bytes_per_second = m->value("bytesPerSecond", 0.0),
                       .files_total = 0});
    if (clock.Now() > deadline) {
      return Fail(2, absl::StrCat("model ", id, " not ready within ", f.timeout,
                                  " (the agent keeps filling it)"));
    }
    if (stop) return Fail(2, "interrupted");
    m = Call(f.agent, "GET", absl::StrCat("/v1/models/", id, "?wait=1"), "", &status);
    if (!m.ok()) return Fail(2, std::string(m.status().message()));
    if (status != 200)
      return Fail(2, absl::StrCat("node agent: HTTP ", status, ": ", m->value("error", "")));
  }
  if (tty) std::fprintf(stderr, "\n");
  if (m->value("state", "") != "ready") {
    return Fail(2, absl::StrCat("model ", id, " failed: ", m->value("error", "unknown error")));
  }
  std::fprintf(stderr, "tessera fetch: model %s ready (%s), lease held by %s for %s\n", id.c_str(),
               Mib(m->value("bytesTotal", int64_t{0})).c_str(), holder.c_str(),
               absl::FormatDuration(ttl).c_str());
  std::printf("%s\n", m->value("path", "").c_str());
  std::fflush(stdout);
  if (int rc = WritePathFile(f.path_file, m->value("path", "")); rc != 0) return rc;
  if (!f.hold) return 0;
  // Sidecar mode: renew the lease at a third of its TTL until SIGTERM, then release it.
  absl::Time next = clock.Now() + ttl / 3;
  nlohmann::json renew = {{"ttlSeconds", absl::ToDoubleSeconds(ttl)}};
  std::string lease_path = absl::StrCat("/v1/models/", id, "/leases/", adapters::UrlEscape(holder));
  while (!stop) {
    absl::SleepFor(absl::Milliseconds(100));
    if (clock.Now() < next) continue;
    absl::StatusOr<nlohmann::json> r = Call(f.agent, "PUT", lease_path, renew.dump(), &status);
    if (!r.ok() || status != 200) {
      std::fprintf(stderr, "tessera fetch: lease renewal failed (%s); retrying\n",
                   r.ok() ? absl::StrCat("HTTP ", status).c_str()
                          : std::string(r.status().message()).c_str());
      next = clock.Now() + absl::Seconds(2);
      continue;
    }
    next = clock.Now() + ttl / 3;
  }
  Call(f.agent, "DELETE", lease_path, "", &status).IgnoreError();
  return 0;
}

}  // namespace

int RunFetch(const FetchFlags& f) {
  absl::Duration timeout;
  if (!absl::ParseDuration(f.timeout, &timeout) || timeout <= absl::ZeroDuration()) {
    return Fail(1, absl::StrCat("--timeout ", f.timeout, ": expected a duration such as 10m"));
  }
  if (!f.agent.empty() && !f.to.empty()) return Fail(1, "give --agent or --to, not both");
  if (!f.agent.empty()) return RunFetchViaAgent(f, timeout);
  if (f.to.empty()) return Fail(1, "--to DIR or --agent unix:///PATH is required");
  if (f.hold) return Fail(1, "--hold needs --agent");
  absl::StatusOr<int64_t> chunk = ParseBytes(f.chunk_size);
  if (!chunk.ok() || *chunk < (64 << 10) || *chunk > (int64_t{1} << 30)) {
    return Fail(1, absl::StrCat("--chunk-size ", f.chunk_size, ": expected 64Ki to 1Gi"));
  }
  if (f.connections < 1 || f.connections > 256) {
    return Fail(1, "--connections: expected 1 to 256");
  }
  adapters::objstore::FetchOptions o;
  o.connections = f.connections;
  o.chunk_bytes = *chunk;
  o.total_timeout = timeout;
  const bool tty = isatty(STDERR_FILENO) != 0;
  o.progress = [tty](const adapters::objstore::FetchProgress& p) { ShowProgress(tty, p); };
  absl::StatusOr<std::vector<adapters::objstore::FileSpec>> files =
      adapters::objstore::ResolveSource(f.source, o);
  if (!files.ok()) {
    return Fail(files.status().code() == absl::StatusCode::kInvalidArgument ? 1 : 2,
                std::string(files.status().message()));
  }
  absl::StatusOr<adapters::objstore::FetchStats> s =
      adapters::objstore::FetchModel(*files, f.to, o);
  if (tty) std::fprintf(stderr, "\n");
  if (!s.ok()) return Fail(2, std::string(s.status().message()));
  if (s->already_complete) {
    std::fprintf(stderr, "tessera fetch: %s is already complete\n", f.to.c_str());
  } else {
    std::fprintf(stderr,
                 "tessera fetch: %zu files, %s (%s from the origin, %s resumed), %d retries, "
                 "%.2f s, %.1f MiB/s\n",
                 files->size(), Mib(s->total_bytes).c_str(), Mib(s->origin_bytes).c_str(),
                 Mib(s->resumed_bytes).c_str(), s->retries, s->seconds,
                 s->seconds > 0 ? s->origin_bytes / s->seconds / 1048576.0 : 0);
  }
  std::printf("%s\n", f.to.c_str());
  return WritePathFile(f.path_file, f.to);
}

}  // namespace tessera::cmd
