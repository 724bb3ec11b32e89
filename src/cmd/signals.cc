#include "cmd/signals.h"

#include <csignal>

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

}  // namespace tessera::cmd
