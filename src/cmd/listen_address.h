// `--listen HOST:PORT` for the subcommands that serve TCP: HOST may be an IPv6 address in
// brackets ([::1]:8443), PORT 0-65535 (0: any free port).
//
// Example:
//   std::string host; int port;
//   if (!SplitListen(flags.listen, &host, &port)) return Fail("--listen ...: expected HOST:PORT");
#pragma once

#include <string>

#include "absl/strings/numbers.h"

namespace tessera::cmd {

inline bool SplitListen(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), port) ||
      *port < 0 || *port > 65535) {
    return false;
  }
  *host = listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return true;
}

}  // namespace tessera::cmd
