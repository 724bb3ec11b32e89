#include "cmd/fetch_command.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "adapters/objstore/fetcher.h"
#include "base/units.h"

namespace tessera::cmd {
namespace {

int Fail(int code, const std::string& message) {
  std::cerr << "tessera fetch: " << message << "\n";
  return code;
}

std::string Mib(int64_t b) { return absl::StrFormat("%.1f MiB", b / 1048576.0); }

}  // namespace

int RunFetch(const FetchFlags& f) {
  if (!f.agent.empty()) {
    return Fail(1, "--agent: the node agent is not built yet; use --to DIR to fetch directly");
  }
  if (f.to.empty())
    return Fail(1, "--to DIR is required (fetching through an agent is not built yet)");
  absl::Duration timeout;
  if (!absl::ParseDuration(f.timeout, &timeout) || timeout <= absl::ZeroDuration()) {
    return Fail(1, absl::StrCat("--timeout ", f.timeout, ": expected a duration such as 10m"));
  }
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
  o.progress = [tty](const adapters::objstore::FetchProgress& p) {
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
  };
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
  return 0;
}

}  // namespace tessera::cmd
