// `tessera node-agent --cache-dir DIR --max-bytes SIZE --listen unix:///PATH [--listen-http ADDR]`:
// the node-local weight cache (services/node_agent) behind its HTTP API. See docs/cache.md.
#pragma once

#include <string>
#include <vector>

namespace tessera::cmd {

struct NodeAgentFlags {
  std::string cache_dir;
  std::string max_bytes;
  std::vector<std::string> listen;  // unix:///PATH (repeatable)
  std::string listen_http;          // HOST:PORT, optional
  int connections = 8;
  std::string chunk_size = "8Mi";
  std::string lease_ttl = "10m";
};

// Exit status: 0 after SIGTERM/SIGINT; 1 bad flags; 2 cannot open the cache or listen.
int RunNodeAgent(const NodeAgentFlags& flags);

}  // namespace tessera::cmd
