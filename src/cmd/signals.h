// SIGTERM / SIGINT -> a stop flag that the long-running subcommands poll.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "absl/status/status.h"

namespace tessera::cmd {

// Installs the handlers (idempotent) and returns the flag they set.
std::atomic<bool>& StopOnSignal();

// Runs `serve(&bound)` (a server that stores the port it bound in `bound` and returns once `stop`
// is set) and writes `announce(port)` to stderr, in one write, once a port is bound; sets `stop`
// when the server returns, and returns its status. The line is how tests and operators learn a
// port picked with :0.
absl::Status ServeAnnounced(std::atomic<bool>& stop,
                            const std::function<std::string(int port)>& announce,
                            const std::function<absl::Status(std::atomic<int>* bound)>& serve);

}  // namespace tessera::cmd
