#include "cmd/scaler_command.h"

#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "adapters/io/files.h"
#include "adapters/keda/scaler.h"
#include "cmd/signals.h"

namespace tessera::cmd {
namespace {

int Fail(const std::string& message) {
  std::cerr << "tessera scaler: " << message << "\n";
  return 1;
}

}  // namespace

int RunScaler(const ScalerFlags& flags) {
  absl::StatusOr<std::string> text = adapters::ReadFile(flags.config_file);
  if (!text.ok()) return Fail(std::string(text.status().message()));
  absl::StatusOr<adapters::ScalerConfig> config =
      adapters::DecodeScalerConfig(flags.config_file, *text);
  if (!config.ok()) return Fail(std::string(config.status().message()));
  if (std::vector<std::string> bad = config->UnreadableFiles(); !bad.empty()) {
    return Fail(absl::StrCat(flags.config_file, ": cannot read ", absl::StrJoin(bad, "; ")));
  }
  adapters::PromSource source(config->prometheus);
  RealClock clock;
  adapters::Scaler scaler(*config, source, clock, [&clock](const std::string& line) {
    std::cerr << absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", clock.Now(), absl::UTCTimeZone()) << " "
              << line << "\n";
  });
  std::atomic<bool>& stop = StopOnSignal();
  std::atomic<int> bound{0};
  std::thread announce([&] {
    while (bound.load() == 0 && !stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (bound.load() > 0) {
      std::cerr << "tessera scaler: " << config->services.size() << " services, Prometheus "
                << config->prometheus.url << ", listening on port " << bound.load() << "\n";
    }
  });
  absl::Status s = adapters::ServeScaler(scaler, flags.listen, &stop, &bound);
  stop.store(true);
  announce.join();
  if (!s.ok()) return Fail(std::string(s.message()));
  return 0;
}

}  // namespace tessera::cmd
