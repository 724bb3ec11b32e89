// `tessera fetch SOURCE --to DIR`: fetch a model's files into DIR; `tessera fetch SOURCE
// --agent unix:///PATH`: ask the node agent for it (init-container mode). See docs/cache.md.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::cmd {

struct FetchFlags {
  std::string source;
  std::string to;
  std::string agent;   // unix:///PATH or http://HOST:PORT: ask the node agent
  std::string holder;  // lease holder (default: $POD_NAME, else host name and pid)
  std::string lease_ttl = "10m";
  std::string path_file;  // also write the local path to this file (for the server container)
  bool hold = false;      // after the path: keep renewing the lease until SIGTERM, then release
  std::string timeout = "10m";
  int connections = 8;
  std::string chunk_size = "8Mi";
};

// Exit status: 0 fetched (prints the local path); 1 bad flags or input; 2 fetch failed.
int RunFetch(const FetchFlags& flags);

}  // namespace tessera::cmd
