// SIGTERM / SIGINT -> a stop flag that the long-running subcommands poll.
#pragma once

#include <atomic>

namespace tessera::cmd {

// Installs the handlers (idempotent) and returns the flag they set.
std::atomic<bool>& StopOnSignal();

}  // namespace tessera::cmd
