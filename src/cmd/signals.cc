#include "cmd/signals.h"

#include <chrono>
#include <csignal>
#include <iostream>
#include <thread>

namespace tessera::cmd {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

}  // namespace

std::atomic<bool>& StopOnSignal() {
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  return g_stop;
}

absl::Status ServeAnnounced(std::atomic<bool>& stop,
                            const std::function<std::string(int port)>& announce,
                            const std::function<absl::Status(std::atomic<int>* bound)>& serve) {
  std::atomic<int> bound{0};
  std::thread announcer([&] {
    while (bound.load() == 0 && !stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (bound.load() > 0) std::cerr << announce(bound.load());  // one write: never half a line
  });
  absl::Status s = serve(&bound);
  stop.store(true);
  announcer.join();
  return s;
}

}  // namespace tessera::cmd
