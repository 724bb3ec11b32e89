// The node cache's decisions, pure (no I/O, no clock reads, no threads): which requests hit,
// join a fill in flight or start one (single flight), the disk budget with shared blobs counted
// once, least-recently-used eviction that never touches a leased or filling model, and leases
// with a TTL. services/node_agent drives it under one mutex and does the I/O.
//
// Example:
//   CacheIndex index(100 << 30);
//   if (index.Request(id, source, now) == RequestKind::kStartFill) {
//     absl::StatusOr<std::vector<std::string>> evict = index.Reserve(id, bytes, now);
//     ...
//   }
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::cache {

enum class ModelState { kFilling, kReady, kFailed };
const char* ModelStateName(ModelState s);

struct ModelEntry {
  std::string id;
  std::string source;
  ModelState state = ModelState::kFilling;
  int64_t bytes_total = 0;  // 0 until the source is resolved
  int64_t bytes_done = 0;
  double bytes_per_second = 0;
  int64_t reserved = 0;                  // budget held by a fill in flight
  std::map<std::string, int64_t> blobs;  // ready: content digest -> bytes
  absl::Time last_used = absl::InfinitePast();
  std::map<std::string, absl::Time> leases;  // holder -> expiry
  std::string error;
};

enum class RequestKind { kHit, kJoin, kStartFill };

class CacheIndex {
 public:
  explicit CacheIndex(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // A request for model `id`: kHit when ready (refreshes its LRU time), kJoin while a fill is in
  // flight, kStartFill for a new or failed model (the entry is then filling; the caller fetches).
  RequestKind Request(const std::string& id, const std::string& source, absl::Time now);

  // Holds `bytes` of budget for the fill of `id`, choosing least-recently-used ready models
  // without a live lease to evict (returned, already removed from the index). ResourceExhausted,
  // naming the figures, when even evicting every candidate would not make room.
  absl::StatusOr<std::vector<std::string>> Reserve(const std::string& id, int64_t bytes,
                                                   absl::Time now);
  void Progress(const std::string& id, int64_t done, int64_t total, double bytes_per_second);
  void MarkReady(const std::string& id, std::map<std::string, int64_t> blobs, absl::Time now);
  void MarkFailed(const std::string& id, std::string error);
  // A ready model found on disk at start.
  void Restore(const std::string& id, const std::string& source,
               std::map<std::string, int64_t> blobs, absl::Time last_used);

  // Creates or renews `holder`'s lease; NotFound for an unknown model.
  absl::Status Lease(const std::string& id, const std::string& holder, absl::Duration ttl,
                     absl::Time now);
  bool Release(const std::string& id, const std::string& holder);
  // Removes a ready or failed model; FailedPrecondition while it fills or holds a live lease.
  absl::Status Remove(const std::string& id, absl::Time now);

  const ModelEntry* Find(const std::string& id) const;
  std::vector<const ModelEntry*> List() const;
  // Budget in use: distinct blobs of ready models plus the reservations of fills.
  int64_t used_bytes() const;
  int64_t max_bytes() const { return max_bytes_; }
  // Digests no ready model references any more (after a removal or eviction): the caller may
  // delete those blobs.
  bool BlobReferenced(const std::string& digest) const { return blob_refs_.contains(digest); }

 private:
  bool Leased(const ModelEntry& e, absl::Time now) const;
  void Unref(ModelEntry& e);

  int64_t max_bytes_;
  std::map<std::string, ModelEntry> models_;
  std::map<std::string, std::pair<int, int64_t>> blob_refs_;  // digest -> (models, bytes)
  int64_t blob_bytes_ = 0;
};

}  // namespace tessera::cache
