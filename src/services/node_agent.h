// `tessera node-agent`: the node-local weight cache. Streams each model from its origin once
// per node (single flight), hands every replica the same read-only files, keeps the disk within
// a budget (LRU eviction, never a leased or filling model), stores identical files once
// (hard links to content-addressed blobs) and survives crashes: a model directory appears
// complete or not at all, and on start the index is rebuilt from disk and interrupted fills
// resume from their verified chunks. The HTTP API is in docs/cache.md.
//
// Layout under the cache directory:
//   models/<id>/...      ready models (files are hard links into blobs/, mode 0444)
//   meta/<id>.json       what was asked for (source, checksums) and, once ready, the files
//   fill/<id>.partial/   a fill in flight (the fetcher's staging; kept across restarts)
//   fill/<id>/           a fetched, verified model waiting for its commit
//   blobs/<sha256>       content-addressed file data
//   trash/               removals in progress
//   leases.json          live leases (model, holder, expiry), rewritten atomically on each change
//                        and restored on start, so a restart never frees a model a pod still uses
//
// Example:
//   absl::StatusOr<std::unique_ptr<NodeAgent>> a = NodeAgent::Open(options);
//   HttpServer server([&](const HttpCall& c) { return (*a)->Handle(c); });
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "adapters/http/server.h"
#include "adapters/objstore/fetcher.h"
#include "base/clock.h"
#include "cache/model_cache.h"

namespace tessera::services {

// The longest lease the agent grants (requests' ttlSeconds, --lease-ttl). A lease is a holder's
// claim that lapses unless renewed; one that could never lapse would pin its model forever.
inline constexpr absl::Duration kMaxLeaseTtl = absl::Hours(24 * 30);

struct NodeAgentOptions {
  std::string cache_dir;
  int64_t max_bytes = 0;
  adapters::objstore::FetchOptions fetch;  // connections, chunk size, retries
  absl::Duration default_lease_ttl = absl::Minutes(10);
  absl::Duration max_wait = absl::Seconds(30);  // longest GET ?wait=
  const Clock* clock = nullptr;                 // nullptr = the real clock
};

class NodeAgent {
 public:
  static absl::StatusOr<std::unique_ptr<NodeAgent>> Open(NodeAgentOptions options);
  ~NodeAgent();  // cancels fills in flight (their chunks stay for the next start)

  adapters::HttpReply Handle(const adapters::HttpCall& call);

  // The model id of a request: 16 hex digits of SHA-256 over the source and the checksums.
  static std::string ModelId(const std::string& source,
                             const std::map<std::string, std::string>& sha256);

  // Waits until no fill is in flight (tests and shutdown).
  void WaitIdle();

  // What the start found and set aside (an unreadable leases.json, ...), for the log.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  explicit NodeAgent(NodeAgentOptions options);
  absl::Status Recover();
  void RestoreLeases();
  // Writes every live lease to leases.json (mu_ held); counts a failure in the metrics.
  absl::Status SaveLeases();
  // Whether a lease just created or renewed must be written: it is new, or what the file says
  // would expire within two thirds of its TTL. Holders renew at a third of the TTL
  // (`tessera fetch --hold`), so a lease restored from the file still lasts until the next
  // renewal, and a steady renewal writes every other time instead of each time.
  bool LeaseNeedsSave(const std::string& id, const std::string& holder, absl::Duration ttl);
  void StartFill(const std::string& id, const std::string& source,
                 const std::map<std::string, std::string>& sha256);
  void RunFill(std::string id, std::string source, std::map<std::string, std::string> sha256);
  absl::StatusOr<std::map<std::string, int64_t>> Commit(
      const std::string& id, const std::string& source,
      const std::map<std::string, std::string>& sha256);
  std::string TrashModel(const std::string& id);
  void CollectBlobs();
  std::string ModelJson(const cache::ModelEntry& e) const;
  std::string Metrics();
  absl::Time Now() const { return clock_->Now(); }

  adapters::HttpReply PostModel(const adapters::HttpCall& call);
  adapters::HttpReply GetModel(const std::string& id, const adapters::HttpCall& call);

  NodeAgentOptions options_;
  const Clock* clock_;
  std::string dir_;

  std::mutex mu_;
  std::condition_variable changed_;
  cache::CacheIndex index_;
  std::map<std::string, std::map<std::string, std::string>> requested_sha_;  // id -> checksums
  std::map<std::string, std::thread> fills_;
  std::vector<std::thread> finished_;
  std::atomic<bool> stopping_{false};
  std::vector<std::string> warnings_;
  std::map<std::pair<std::string, std::string>, absl::Time> saved_leases_;  // as in leases.json

  // Metrics (under mu_).
  int64_t hits_ = 0, misses_ = 0, joins_ = 0, origin_bytes_ = 0, evictions_ = 0;
  int64_t fills_ok_ = 0, fills_failed_ = 0, resumed_bytes_ = 0, lease_save_errors_ = 0;
  double last_fill_rate_ = 0, fill_seconds_ = 0;
};

}  // namespace tessera::services
