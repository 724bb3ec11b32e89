#include "cache/model_cache.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera::cache {

const char* ModelStateName(ModelState s) {
  switch (s) {
    case ModelState::kFilling:
      return "filling";
    case ModelState::kReady:
      return "ready";
    case ModelState::kFailed:
      return "failed";
  }
  return "unknown";
}

RequestKind CacheIndex::Request(const std::string& id, const std::string& source, absl::Time now) {
  auto [it, inserted] = models_.try_emplace(id);
  ModelEntry& e = it->second;
  if (!inserted && e.state == ModelState::kReady) {
    e.last_used = now;
    return RequestKind::kHit;
  }
  if (!inserted && e.state == ModelState::kFilling) return RequestKind::kJoin;
  e.id = id;
  e.source = source;
  e.state = ModelState::kFilling;
  e.error.clear();
  e.bytes_done = 0;
  e.bytes_per_second = 0;
  e.last_used = now;
  return RequestKind::kStartFill;
}

bool CacheIndex::Leased(const ModelEntry& e, absl::Time now) const {
  for (const auto& [holder, expiry] : e.leases) {
    if (expiry > now) return true;
  }
  return false;
}

void CacheIndex::Unref(ModelEntry& e) {
  for (const auto& [digest, bytes] : e.blobs) {
    auto it = blob_refs_.find(digest);
    if (it == blob_refs_.end()) continue;
    if (--it->second.first == 0) {
      blob_bytes_ -= it->second.second;
      blob_refs_.erase(it);
    }
  }
  e.blobs.clear();
}

int64_t CacheIndex::used_bytes() const {
  int64_t used = blob_bytes_;
  for (const auto& [id, e] : models_) used += e.reserved;
  return used;
}

absl::StatusOr<std::vector<std::string>> CacheIndex::Reserve(const std::string& id, int64_t bytes,
                                                             absl::Time now) {
  auto self = models_.find(id);
  if (self == models_.end()) return absl::NotFoundError(absl::StrCat("model ", id, " unknown"));
  self->second.reserved = 0;
  if (bytes > max_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "model needs ", bytes, " bytes, more than the cache's whole budget of ", max_bytes_));
  }
  // Candidates, least recently used first; evict only while it is still needed.
  std::vector<ModelEntry*> candidates;
  for (auto& [mid, e] : models_) {
    if (mid != id && e.state == ModelState::kReady && !Leased(e, now)) candidates.push_back(&e);
  }
  std::sort(candidates.begin(), candidates.end(), [](const ModelEntry* a, const ModelEntry* b) {
    return a->last_used != b->last_used ? a->last_used < b->last_used : a->id < b->id;
  });
  // Dry run first: is there room at all once every candidate is gone?
  int64_t freeable = 0;
  {
    std::map<std::string, int> drop;
    for (ModelEntry* e : candidates) {
      for (const auto& [d, b] : e->blobs) {
        if (++drop[d] == blob_refs_.at(d).first) freeable += b;
      }
    }
  }
  if (used_bytes() - freeable + bytes > max_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "no room for ", bytes, " bytes: budget ", max_bytes_, ", in use ", used_bytes(),
        ", of which only ", freeable, " can be evicted (the rest is leased or filling)"));
  }
  std::vector<std::string> evicted;
  for (ModelEntry* e : candidates) {
    if (used_bytes() + bytes <= max_bytes_) break;
    std::string victim = e->id;
    Unref(*e);
    models_.erase(victim);
    evicted.push_back(std::move(victim));
  }
  models_.at(id).reserved = bytes;
  return evicted;
}

void CacheIndex::Progress(const std::string& id, int64_t done, int64_t total, double rate) {
  auto it = models_.find(id);
  if (it == models_.end()) return;
  it->second.bytes_done = done;
  it->second.bytes_total = total;
  it->second.bytes_per_second = rate;
}

void CacheIndex::MarkReady(const std::string& id, std::map<std::string, int64_t> blobs,
                           absl::Time now) {
  auto it = models_.find(id);
  if (it == models_.end()) return;
  ModelEntry& e = it->second;
  Unref(e);
  e.blobs = std::move(blobs);
  e.bytes_total = 0;
  for (const auto& [d, b] : e.blobs) {
    auto [r, fresh] = blob_refs_.try_emplace(d, 0, b);
    if (r->second.first++ == 0) blob_bytes_ += b;
    e.bytes_total += b;
  }
  e.bytes_done = e.bytes_total;
  e.reserved = 0;
  e.state = ModelState::kReady;
  e.error.clear();
  e.last_used = now;
}

void CacheIndex::MarkFailed(const std::string& id, std::string error) {
  auto it = models_.find(id);
  if (it == models_.end()) return;
  it->second.state = ModelState::kFailed;
  it->second.error = std::move(error);
  it->second.reserved = 0;
}

void CacheIndex::Restore(const std::string& id, const std::string& source,
                         std::map<std::string, int64_t> blobs, absl::Time last_used) {
  ModelEntry& e = models_[id];
  e.id = id;
  e.source = source;
  MarkReady(id, std::move(blobs), last_used);
}

absl::Status CacheIndex::Lease(const std::string& id, const std::string& holder, absl::Duration ttl,
                               absl::Time now) {
  auto it = models_.find(id);
  if (it == models_.end()) return absl::NotFoundError(absl::StrCat("model ", id, " unknown"));
  if (holder.empty()) return absl::InvalidArgumentError("a lease needs a holder");
  for (auto l = it->second.leases.begin(); l != it->second.leases.end();) {
    l = l->second <= now ? it->second.leases.erase(l) : std::next(l);  // expired ones go
  }
  it->second.leases[holder] = now + ttl;
  it->second.last_used = now;
  return absl::OkStatus();
}

bool CacheIndex::Release(const std::string& id, const std::string& holder) {
  auto it = models_.find(id);
  return it != models_.end() && it->second.leases.erase(holder) > 0;
}

absl::Status CacheIndex::Remove(const std::string& id, absl::Time now) {
  auto it = models_.find(id);
  if (it == models_.end()) return absl::NotFoundError(absl::StrCat("model ", id, " unknown"));
  if (it->second.state == ModelState::kFilling) {
    return absl::FailedPreconditionError(absl::StrCat("model ", id, " is filling"));
  }
  if (Leased(it->second, now)) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", id, " is leased by ", it->second.leases.size(), " holder(s)"));
  }
  Unref(it->second);
  models_.erase(it);
  return absl::OkStatus();
}

const ModelEntry* CacheIndex::Find(const std::string& id) const {
  auto it = models_.find(id);
  return it == models_.end() ? nullptr : &it->second;
}

std::vector<const ModelEntry*> CacheIndex::List() const {
  std::vector<const ModelEntry*> out;
  for (const auto& [id, e] : models_) out.push_back(&e);
  return out;
}

}  // namespace tessera::cache
