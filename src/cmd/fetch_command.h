// `tessera fetch SOURCE --to DIR`: fetch a model's files into DIR (init-container mode without
// an agent). See docs/cache.md.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::cmd {

struct FetchFlags {
  std::string source;
  std::string to;
  std::string agent;  // unix:///PATH: the node agent (not built yet)
  std::string timeout = "10m";
  int connections = 8;
  std::string chunk_size = "8Mi";
};

// Exit status: 0 fetched (prints the local path); 1 bad flags or input; 2 fetch failed.
int RunFetch(const FetchFlags& flags);

}  // namespace tessera::cmd
