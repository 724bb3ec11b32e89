#include "services/node_agent.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "adapters/objstore/verify.h"
#include "base/status.h"
#include "nlohmann/json.hpp"

namespace tessera::services {
namespace fs = std::filesystem;
using adapters::HttpCall;
using adapters::HttpReply;
using cache::ModelEntry;
using cache::ModelState;
using cache::RequestKind;
using nlohmann::json;

namespace {

HttpReply Json(int status, const json& j) { return {status, "application/json", j.dump() + "\n"}; }
HttpReply Error(int status, const std::string& message) {
  return Json(status, {{"error", message}});
}

// The optional "ttlSeconds" of a request object: seconds in (0, kMaxLeaseTtl], `dflt` when
// absent. The error names `field`.
absl::StatusOr<absl::Duration> LeaseTtl(const json& obj, absl::string_view field,
                                        absl::Duration dflt) {
  if (!obj.contains("ttlSeconds")) return dflt;
  const json& v = obj["ttlSeconds"];
  if (v.is_number()) {
    const double s = v.get<double>();
    if (s > 0 && s <= absl::ToDoubleSeconds(kMaxLeaseTtl)) return absl::Seconds(s);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": expected a number of seconds above 0 and at most ",
      absl::ToInt64Seconds(kMaxLeaseTtl), " (", absl::FormatDuration(kMaxLeaseTtl), ")"));
}

int StatusFor(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kFailedPrecondition:
      return 409;
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kResourceExhausted:
      return 507;
    default:
      return 500;
  }
}

void SyncPath(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

// Writes `text` to `path` atomically: a temporary file, fsync, rename, fsync of the directory.
absl::Status WriteAtomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", tmp, ": ", strerror(errno)));
  size_t off = 0;
  while (off < text.size()) {
    ssize_t w = write(fd, text.data() + off, text.size() - off);
    if (w <= 0) {
      close(fd);
      unlink(tmp.c_str());
      return absl::ResourceExhaustedError(absl::StrCat("write ", tmp, ": ", strerror(errno)));
    }
    off += static_cast<size_t>(w);
  }
  fsync(fd);
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("rename ", tmp, ": ", strerror(errno)));
  }
  SyncPath(fs::path(path).parent_path().string());
  return absl::OkStatus();
}

bool ValidId(const std::string& id) {
  return id.size() == 16 && std::all_of(id.begin(), id.end(), [](char c) {
           return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

std::string NodeAgent::ModelId(const std::string& source,
                               const std::map<std::string, std::string>& sha256) {
  std::string key = source;
  for (const auto& [name, digest] : sha256) absl::StrAppend(&key, "\n", name, "=", digest);
  return adapters::objstore::Sha256Hex(key).substr(0, 16);
}

NodeAgent::NodeAgent(NodeAgentOptions options)
    : options_(std::move(options)),
      clock_(options_.clock),
      dir_(options_.cache_dir),
      index_(options_.max_bytes) {
  static const RealClock real_clock;
  if (clock_ == nullptr) clock_ = &real_clock;
}

absl::StatusOr<std::unique_ptr<NodeAgent>> NodeAgent::Open(NodeAgentOptions options) {
  if (options.cache_dir.empty()) return absl::InvalidArgumentError("--cache-dir is required");
  if (options.max_bytes <= 0) return absl::InvalidArgumentError("--max-bytes must be positive");
  std::unique_ptr<NodeAgent> a(new NodeAgent(std::move(options)));
  TESSERA_RETURN_IF_ERROR(a->Recover());
  return a;
}

NodeAgent::~NodeAgent() {
  stopping_ = true;
  changed_.notify_all();
  std::map<std::string, std::thread> fills;
  std::vector<std::thread> finished;
  {
    std::lock_guard<std::mutex> l(mu_);
    fills.swap(fills_);
    finished.swap(finished_);
  }
  for (auto& [id, t] : fills) t.join();
  {
    std::lock_guard<std::mutex> l(mu_);
    for (std::thread& t : finished_) finished.push_back(std::move(t));
    finished_.clear();
  }
  for (std::thread& t : finished) t.join();
}

void NodeAgent::WaitIdle() {
  std::unique_lock<std::mutex> l(mu_);
  changed_.wait(l, [this] { return fills_.empty(); });
}

absl::Status NodeAgent::Recover() {
  std::error_code ec;
  for (const char* sub : {"models", "meta", "fill", "blobs", "trash"}) {
    fs::create_directories(fs::path(dir_) / sub, ec);
    if (ec) return absl::InternalError(absl::StrCat("mkdir ", dir_, "/", sub, ": ", ec.message()));
  }
  for (const auto& e : fs::directory_iterator(fs::path(dir_) / "trash")) fs::remove_all(e, ec);
  std::set<std::string> known;
  std::vector<std::pair<std::string, std::string>> resume;  // id, source
  for (const auto& e : fs::directory_iterator(fs::path(dir_) / "meta")) {
    std::string file = e.path().filename().string();
    if (!absl::EndsWith(file, ".json")) {
      fs::remove(e.path(), ec);  // a *.json.tmp from an interrupted write
      continue;
    }
    std::string id = file.substr(0, file.size() - 5);
    std::ifstream in(e.path());
    json m = json::parse(in, nullptr, false);
    if (!ValidId(id) || !m.is_object() || !m.contains("source") || !m["source"].is_string()) {
      fs::remove(e.path(), ec);  // untrusted: what it described is refetched on request
      continue;
    }
    std::map<std::string, std::string> sha;
    if (m.contains("sha256") && m["sha256"].is_object()) {
      for (auto it = m["sha256"].begin(); it != m["sha256"].end(); ++it) {
        if (it.value().is_string()) sha[it.key()] = it.value().get<std::string>();
      }
    }
    requested_sha_[id] = sha;
    known.insert(id);
    fs::path model = fs::path(dir_) / "models" / id;
    bool ready = false;
    std::map<std::string, int64_t> blobs;
    if (fs::is_directory(model, ec) && m.contains("files") && m["files"].is_array()) {
      ready = true;
      for (const json& f : m["files"]) {
        if (!f.is_object() || !f.contains("name") || !f.contains("size") || !f.contains("sha256") ||
            !f["name"].is_string() || !f["size"].is_number_integer() || !f["sha256"].is_string()) {
          ready = false;
          break;
        }
        std::string name = f["name"].get<std::string>();
        fs::path p = model / name;
        if (!adapters::objstore::ValidateRelativeName(name).ok() || !fs::is_regular_file(p, ec) ||
            static_cast<int64_t>(fs::file_size(p, ec)) != f["size"].get<int64_t>()) {
          ready = false;
          break;
        }
        blobs[f["sha256"].get<std::string>()] = f["size"].get<int64_t>();
      }
    }
    if (ready) {
      struct stat sb;
      absl::Time used =
          stat(e.path().c_str(), &sb) == 0 ? absl::FromUnixSeconds(sb.st_mtim.tv_sec) : Now();
      index_.Restore(id, m["source"].get<std::string>(), std::move(blobs), used);
    } else {
      if (fs::exists(model, ec)) {
        fs::rename(model, fs::path(dir_) / "trash" / id, ec);
        fs::remove_all(fs::path(dir_) / "trash" / id, ec);
      }
      resume.emplace_back(id, m["source"].get<std::string>());
    }
  }
  // Directories nothing describes cannot be trusted.
  for (const char* sub : {"models", "fill"}) {
    for (const auto& e : fs::directory_iterator(fs::path(dir_) / sub)) {
      std::string name = e.path().filename().string();
      bool partial = absl::EndsWith(name, ".partial");
      std::string id = partial ? name.substr(0, name.size() - 8) : name;
      bool keep = known.contains(id) && (std::string(sub) == "fill" || index_.Find(id) != nullptr);
      if (!keep) fs::remove_all(e.path(), ec);
    }
  }
  CollectBlobs();
  for (const auto& [id, source] : resume) {
    std::lock_guard<std::mutex> l(mu_);
    index_.Request(id, source, Now());
    StartFill(id, source, requested_sha_[id]);
  }
  RestoreLeases();
  return absl::OkStatus();
}

void NodeAgent::RestoreLeases() {
  const std::string path = dir_ + "/leases.json";
  std::error_code ec;
  fs::remove(path + ".tmp", ec);  // an interrupted rewrite; leases.json itself is whole
  if (!fs::exists(path, ec)) return;
  std::ifstream in(path);
  json doc = json::parse(in, nullptr, false);
  std::lock_guard<std::mutex> l(mu_);
  if (!doc.is_object() || !doc.contains("leases") || !doc["leases"].is_array()) {
    warnings_.push_back(absl::StrCat(path, ": expected {\"leases\": [...]}; leases not restored"));
  } else {
    int bad = 0, clamped = 0;
    for (const json& e : doc["leases"]) {
      absl::Time expires;
      std::string err;
      if (!e.is_object() || !e.contains("model") || !e["model"].is_string() ||
          !e.contains("holder") || !e["holder"].is_string() || !e.contains("expires") ||
          !e["expires"].is_string() ||
          !absl::ParseTime(absl::RFC3339_full, e["expires"].get<std::string>(), &expires, &err)) {
        ++bad;
        continue;
      }
      absl::Time now = Now();
      // A lease never outlasts the longest the agent grants: an edited file (a year-9999 or
      // "infinite-future" expiry, which ParseTime accepts) would otherwise pin its model forever.
      if (expires - now > kMaxLeaseTtl) {
        expires = now + kMaxLeaseTtl;
        ++clamped;
      }
      // Expired leases and leases of models no longer on disk lapse.
      if (expires > now) {
        index_
            .Lease(e["model"].get<std::string>(), e["holder"].get<std::string>(), expires - now,
                   now)
            .IgnoreError();
      }
    }
    if (clamped > 0) {
      warnings_.push_back(absl::StrCat(path, ": ", clamped,
                                       " leases expiring more than 30 days ahead were cut to 30 "
                                       "days (the longest the agent grants)"));
    }
    if (bad > 0) {
      warnings_.push_back(absl::StrCat(path, ": ", bad,
                                       " entries without a string model, holder and RFC 3339 "
                                       "expires were skipped"));
    }
  }
  SaveLeases().IgnoreError();  // drops what lapsed
}

bool NodeAgent::LeaseNeedsSave(const std::string& id, const std::string& holder,
                               absl::Duration ttl) {
  auto it = saved_leases_.find({id, holder});
  return it == saved_leases_.end() || it->second < Now() + ttl * 2 / 3;
}

absl::Status NodeAgent::SaveLeases() {
  json leases = json::array();
  std::map<std::pair<std::string, std::string>, absl::Time> saved;
  absl::Time now = Now();
  for (const ModelEntry* e : index_.List()) {
    for (const auto& [holder, expires] : e->leases) {
      if (expires <= now) continue;
      saved[{e->id, holder}] = expires;
      leases.push_back(
          {{"model", e->id},
           {"holder", holder},
           {"expires", absl::FormatTime(absl::RFC3339_full, expires, absl::UTCTimeZone())}});
    }
  }
  absl::Status s = WriteAtomic(dir_ + "/leases.json", json{{"leases", leases}}.dump());
  if (!s.ok()) {
    ++lease_save_errors_;
    return s;
  }
  saved_leases_ = std::move(saved);
  return s;
}

void NodeAgent::CollectBlobs() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(dir_) / "blobs", ec)) {
    struct stat sb;
    if (lstat(e.path().c_str(), &sb) == 0 && sb.st_nlink <= 1) fs::remove(e.path(), ec);
  }
}

std::string NodeAgent::TrashModel(const std::string& id) {
  // Called with mu_ held: the model leaves models/ and meta/ at once (two renames/unlinks), so a
  // new request for the same id cannot see half of it; the data goes later, without the lock.
  std::error_code ec;
  fs::path trash = fs::path(dir_) / "trash" / absl::StrCat(id, "-", absl::ToUnixNanos(Now()));
  fs::rename(fs::path(dir_) / "models" / id, trash, ec);
  fs::remove(fs::path(dir_) / "meta" / (id + ".json"), ec);
  SyncPath(dir_ + "/meta");
  return trash.string();
}

void NodeAgent::StartFill(const std::string& id, const std::string& source,
                          const std::map<std::string, std::string>& sha256) {
  // Called with mu_ held.
  requested_sha_[id] = sha256;
  fills_[id] = std::thread(&NodeAgent::RunFill, this, id, source, sha256);
}

void NodeAgent::RunFill(std::string id, std::string source,
                        std::map<std::string, std::string> sha256) {
  namespace os = adapters::objstore;
  auto finish = [&](const absl::Status& s, std::map<std::string, int64_t> blobs) {
    std::lock_guard<std::mutex> l(mu_);
    if (s.ok()) {
      index_.MarkReady(id, std::move(blobs), Now());
      ++fills_ok_;
    } else if (s.code() != absl::StatusCode::kCancelled) {
      index_.MarkFailed(id, std::string(s.message()));
      ++fills_failed_;
    }
    auto it = fills_.find(id);
    if (it != fills_.end()) {
      finished_.push_back(std::move(it->second));
      fills_.erase(it);
    }
    changed_.notify_all();
  };
  os::FetchOptions fo = options_.fetch;
  fo.clock = clock_;
  fo.cancel = &stopping_;
  fo.progress = [this, &id](const os::FetchProgress& p) {
    std::lock_guard<std::mutex> l(mu_);
    index_.Progress(id, p.bytes_done, p.bytes_total, p.bytes_per_second);
  };
  json meta = {{"id", id}, {"source", source}, {"sha256", sha256}};
  if (absl::Status s = WriteAtomic(absl::StrCat(dir_, "/meta/", id, ".json"), meta.dump());
      !s.ok()) {
    return finish(s, {});
  }
  absl::StatusOr<std::vector<os::FileSpec>> files = os::ResolveSource(source, fo);
  if (!files.ok()) return finish(files.status(), {});
  for (const auto& [name, digest] : sha256) {
    bool found = false;
    for (os::FileSpec& f : *files) {
      if (f.name == name) {
        f.sha256 = absl::AsciiStrToLower(digest);
        found = true;
      }
    }
    if (!found) {
      return finish(absl::InvalidArgumentError(absl::StrCat("sha256 is given for \"", name,
                                                            "\", which the source does not have")),
                    {});
    }
  }
  if (absl::Status s = os::FillSizes(&*files, fo); !s.ok()) return finish(s, {});
  int64_t total = 0;
  for (const os::FileSpec& f : *files) total += f.size;
  absl::StatusOr<std::vector<std::string>> evicted;
  std::vector<std::string> trash;
  {
    std::lock_guard<std::mutex> l(mu_);
    evicted = index_.Reserve(id, total, Now());
    if (evicted.ok()) {
      evictions_ += static_cast<int64_t>(evicted->size());
      for (const std::string& e : *evicted) {
        requested_sha_.erase(e);
        trash.push_back(TrashModel(e));
      }
      index_.Progress(id, 0, total, 0);
    }
  }
  if (!evicted.ok()) return finish(evicted.status(), {});
  std::error_code ec;
  for (const std::string& t : trash) fs::remove_all(t, ec);
  if (!trash.empty()) CollectBlobs();
  const std::string fill = absl::StrCat(dir_, "/fill/", id);
  absl::StatusOr<os::FetchStats> st = os::FetchModel(*files, fill, fo);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (st.ok()) {
      origin_bytes_ += st->origin_bytes;
      resumed_bytes_ += st->resumed_bytes;
      fill_seconds_ += st->seconds;
      if (st->seconds > 0) last_fill_rate_ = st->origin_bytes / st->seconds;
    }
  }
  if (!st.ok()) {
    std::error_code ec;
    if (st.status().code() == absl::StatusCode::kResourceExhausted ||
        st.status().code() == absl::StatusCode::kDataLoss) {
      fs::remove_all(fill + ".partial", ec);  // nothing there is worth resuming
    }
    return finish(st.status(), {});
  }
  std::map<std::string, std::string> known;
  for (const os::FileSpec& f : *files) {
    if (!f.sha256.empty()) known[f.name] = f.sha256;  // verified by the fetcher
  }
  absl::StatusOr<std::map<std::string, int64_t>> blobs = Commit(id, source, known);
  if (!blobs.ok()) return finish(blobs.status(), {});
  finish(absl::OkStatus(), *std::move(blobs));
}

absl::StatusOr<std::map<std::string, int64_t>> NodeAgent::Commit(
    const std::string& id, const std::string& source,
    const std::map<std::string, std::string>& known_sha) {
  namespace os = adapters::objstore;
  std::error_code ec;
  const fs::path fill = fs::path(dir_) / "fill" / id;
  const fs::path blobs_dir = fs::path(dir_) / "blobs";
  std::map<std::string, int64_t> blobs;
  json files = json::array();
  std::vector<fs::path> entries;
  for (const auto& e : fs::recursive_directory_iterator(fill)) {
    if (absl::EndsWith(e.path().string(), ".tessera-link")) {
      fs::remove(e.path(), ec);  // from a commit a crash interrupted
    } else if (e.is_regular_file()) {
      entries.push_back(e.path());
    }
  }
  for (const fs::path& p : entries) {
    std::string name = fs::relative(p, fill).string();
    auto k = known_sha.find(name);
    std::string digest;
    if (k != known_sha.end()) {
      digest = k->second;
    } else {
      TESSERA_ASSIGN_OR_RETURN(digest, os::Sha256File(p.string()));
    }
    int64_t size = static_cast<int64_t>(fs::file_size(p));
    fs::path blob = blobs_dir / digest;
    struct stat pb, bb;
    bool same_inode = stat(p.c_str(), &pb) == 0 && stat(blob.c_str(), &bb) == 0 &&
                      pb.st_ino == bb.st_ino && pb.st_dev == bb.st_dev;
    if (!same_inode) {
      bool linked = false;
      if (stat(blob.c_str(), &bb) == 0 && bb.st_size == size) {
        // Identical content is stored once: the file becomes another link to the blob.
        std::string tmp = p.string() + ".tessera-link";
        if (link(blob.c_str(), tmp.c_str()) == 0) {
          if (rename(tmp.c_str(), p.c_str()) != 0) {
            return absl::InternalError(absl::StrCat("rename ", tmp, ": ", strerror(errno)));
          }
          linked = true;
        }
      }
      if (!linked) {
        fs::remove(blob, ec);  // absent, or of another size than its name says: replaced
        if (link(p.c_str(), blob.c_str()) != 0 && errno != EEXIST) {
          return absl::InternalError(absl::StrCat("link ", blob.string(), ": ", strerror(errno)));
        }
      }
    }
    chmod(p.c_str(), 0444);
    blobs[digest] = size;
    files.push_back({{"name", name}, {"size", size}, {"sha256", digest}});
  }
  SyncPath(blobs_dir.string());
  json meta = {
      {"id", id},
      {"source", source},
      {"sha256", requested_sha_.contains(id) ? json(requested_sha_.at(id)) : json::object()},
      {"files", files}};
  TESSERA_RETURN_IF_ERROR(WriteAtomic(absl::StrCat(dir_, "/meta/", id, ".json"), meta.dump()));
  SyncPath(fill.string());
  fs::path dest = fs::path(dir_) / "models" / id;
  fs::rename(fill, dest, ec);
  if (ec) return absl::InternalError(absl::StrCat("rename ", fill.string(), ": ", ec.message()));
  SyncPath(dir_ + "/models");
  return blobs;
}

std::string NodeAgent::ModelJson(const ModelEntry& e) const {
  json leases = json::array();
  for (const auto& [holder, expiry] : e.leases) {
    if (expiry > Now())
      leases.push_back({{"holder", holder}, {"expiresAt", absl::FormatTime(expiry)}});
  }
  json j = {{"id", e.id},
            {"source", e.source},
            {"state", cache::ModelStateName(e.state)},
            {"bytesDone", e.bytes_done},
            {"bytesTotal", e.bytes_total},
            {"bytesPerSecond", e.bytes_per_second},
            {"leases", leases}};
  if (e.state == ModelState::kReady) j["path"] = absl::StrCat(dir_, "/models/", e.id);
  if (e.state == ModelState::kFailed) j["error"] = e.error;
  return j.dump();
}

HttpReply NodeAgent::PostModel(const HttpCall& call) {
  json body = json::parse(call.body, nullptr, false);
  if (body.is_discarded()) return Error(400, "invalid JSON body");
  if (!body.is_object() || !body.contains("source") || !body["source"].is_string()) {
    return Error(400, "expected {\"source\": \"http(s)://... or s3://...\"}");
  }
  std::string source = body["source"].get<std::string>();
  if (!absl::StartsWith(source, "http://") && !absl::StartsWith(source, "https://") &&
      !absl::StartsWith(source, "s3://")) {
    return Error(400, "source: expected an http://, https:// or s3:// URL");
  }
  std::map<std::string, std::string> sha;
  if (body.contains("sha256")) {
    if (!body["sha256"].is_object()) return Error(400, "sha256: expected {\"file\": \"64 hex\"}");
    for (auto it = body["sha256"].begin(); it != body["sha256"].end(); ++it) {
      if (!it.value().is_string() ||
          !adapters::objstore::IsSha256Hex(it.value().get<std::string>())) {
        return Error(400, absl::StrCat("sha256[\"", it.key(), "\"]: expected 64 hex digits"));
      }
      if (absl::Status v = adapters::objstore::ValidateRelativeName(it.key()); !v.ok()) {
        return Error(400, absl::StrCat("sha256: ", v.message()));
      }
      sha[it.key()] = absl::AsciiStrToLower(it.value().get<std::string>());
    }
  }
  std::string holder;
  absl::Duration ttl = options_.default_lease_ttl;
  if (body.contains("lease")) {
    const json& l = body["lease"];
    if (!l.is_object() || !l.contains("holder") || !l["holder"].is_string() ||
        l["holder"].get<std::string>().empty()) {
      return Error(400, "lease: expected {\"holder\": \"pod name\", \"ttlSeconds\": N}");
    }
    holder = l["holder"].get<std::string>();
    absl::StatusOr<absl::Duration> t = LeaseTtl(l, "lease.ttlSeconds", ttl);
    if (!t.ok()) return Error(400, std::string(t.status().message()));
    ttl = *t;
  }
  std::string id = ModelId(source, sha);
  std::lock_guard<std::mutex> l(mu_);
  RequestKind kind = index_.Request(id, source, Now());
  if (kind == RequestKind::kHit) {
    ++hits_;
    struct timespec ts[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    utimensat(AT_FDCWD, absl::StrCat(dir_, "/meta/", id, ".json").c_str(), ts, 0);  // LRU time
  } else if (kind == RequestKind::kJoin) {
    ++joins_;
  } else {
    ++misses_;
    StartFill(id, source, sha);
  }
  if (!holder.empty() && index_.Lease(id, holder, ttl, Now()).ok() &&
      LeaseNeedsSave(id, holder, ttl)) {
    SaveLeases().IgnoreError();  // the lease holds in memory; the failure is in the metrics
  }
  const ModelEntry* e = index_.Find(id);
  return {e->state == ModelState::kReady ? 200 : 202, "application/json", ModelJson(*e) + "\n"};
}

HttpReply NodeAgent::GetModel(const std::string& id, const HttpCall& call) {
  std::unique_lock<std::mutex> l(mu_);
  if (index_.Find(id) == nullptr) return Error(404, absl::StrCat("model ", id, " unknown"));
  if (auto w = call.query.find("wait"); w != call.query.end()) {
    double secs = 0;
    // "nan" parses as a number and passes `secs < 0`; it would have waited the longest.
    if (!absl::SimpleAtod(w->second, &secs) || !(secs >= 0)) {
      return Error(400, absl::StrCat("wait: expected seconds, 0 or more (waits at most ",
                                     absl::FormatDuration(options_.max_wait), "); found \"",
                                     w->second, "\""));
    }
    absl::Duration wait = std::min(absl::Seconds(secs), options_.max_wait);
    changed_.wait_for(l, absl::ToChronoMilliseconds(wait), [&] {
      const ModelEntry* e = index_.Find(id);
      return stopping_ || e == nullptr || e->state != ModelState::kFilling;
    });
  }
  const ModelEntry* e = index_.Find(id);
  if (e == nullptr) return Error(404, absl::StrCat("model ", id, " was removed"));
  return {200, "application/json", ModelJson(*e) + "\n"};
}

std::string NodeAgent::Metrics() {
  // Disk actually used: every distinct inode under the cache directory once (walked without the
  // lock, so a scrape never holds up requests).
  int64_t disk = 0;
  std::set<std::pair<dev_t, ino_t>> seen;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir_, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    struct stat sb;
    if (lstat(it->path().c_str(), &sb) == 0 && S_ISREG(sb.st_mode) &&
        seen.insert({sb.st_dev, sb.st_ino}).second) {
      disk += static_cast<int64_t>(sb.st_blocks) * 512;
    }
  }
  std::lock_guard<std::mutex> l(mu_);
  std::map<std::string, int> states = {{"filling", 0}, {"ready", 0}, {"failed", 0}};
  for (const ModelEntry* e : index_.List()) ++states[cache::ModelStateName(e->state)];
  std::string out;
  auto metric = [&out](const char* name, const char* type, const char* help, auto value,
                       const std::string& labels = "") {
    absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name,
                    labels, " ", value, "\n");
  };
  absl::StrAppend(&out, "# HELP tessera_cache_requests_total Model requests by outcome.\n",
                  "# TYPE tessera_cache_requests_total counter\n",
                  "tessera_cache_requests_total{result=\"hit\"} ", hits_, "\n",
                  "tessera_cache_requests_total{result=\"miss\"} ", misses_, "\n",
                  "tessera_cache_requests_total{result=\"join\"} ", joins_, "\n");
  metric("tessera_cache_origin_bytes_total", "counter", "Bytes received from origins.",
         origin_bytes_);
  metric("tessera_cache_resumed_bytes_total", "counter",
         "Bytes kept from interrupted fills instead of refetched.", resumed_bytes_);
  absl::StrAppend(&out, "# HELP tessera_cache_fills_total Fills by result.\n",
                  "# TYPE tessera_cache_fills_total counter\n",
                  "tessera_cache_fills_total{result=\"ok\"} ", fills_ok_, "\n",
                  "tessera_cache_fills_total{result=\"failed\"} ", fills_failed_, "\n");
  metric("tessera_cache_fill_seconds_total", "counter", "Seconds spent filling.", fill_seconds_);
  metric("tessera_cache_fill_bytes_per_second", "gauge",
         "Origin throughput of the last completed fill.", last_fill_rate_);
  metric("tessera_cache_evictions_total", "counter", "Models evicted for space.", evictions_);
  metric("tessera_cache_lease_save_errors_total", "counter",
         "Lease changes that could not be written to leases.json.", lease_save_errors_);
  metric("tessera_cache_disk_used_bytes", "gauge", "Disk used under the cache directory.", disk);
  metric("tessera_cache_budget_used_bytes", "gauge",
         "Budget in use: distinct ready files plus reservations of fills.", index_.used_bytes());
  metric("tessera_cache_budget_bytes", "gauge", "The --max-bytes budget.", index_.max_bytes());
  absl::StrAppend(&out, "# HELP tessera_cache_models Models by state.\n",
                  "# TYPE tessera_cache_models gauge\n");
  for (const auto& [s, n] : states) {
    absl::StrAppend(&out, "tessera_cache_models{state=\"", s, "\"} ", n, "\n");
  }
  return out;
}

HttpReply NodeAgent::Handle(const HttpCall& call) {
  std::vector<std::string> parts = absl::StrSplit(call.path, '/', absl::SkipEmpty());
  if (call.path == "/healthz") return {200, "text/plain", "ok\n"};
  if (call.path == "/metrics" && call.method == "GET") {
    return {200, "text/plain; version=0.0.4", Metrics()};
  }
  if (parts.size() < 2 || parts[0] != "v1" || parts[1] != "models") {
    return Error(404, absl::StrCat("no such endpoint: ", call.method, " ", call.path));
  }
  if (parts.size() == 2) {
    if (call.method == "POST") return PostModel(call);
    if (call.method == "GET") {
      std::lock_guard<std::mutex> l(mu_);
      std::string out = "{\"models\": [";
      bool first = true;
      for (const ModelEntry* e : index_.List()) {
        absl::StrAppend(&out, first ? "" : ", ", ModelJson(*e));
        first = false;
      }
      return {200, "application/json", out + "]}\n"};
    }
    return Error(405, "use GET or POST on /v1/models");
  }
  const std::string& id = parts[2];
  if (!ValidId(id)) return Error(404, absl::StrCat("model ", id, " unknown"));
  if (parts.size() == 3) {
    if (call.method == "GET") return GetModel(id, call);
    if (call.method == "DELETE") {
      std::string trash;
      {
        std::lock_guard<std::mutex> l(mu_);
        absl::Status s = index_.Remove(id, Now());
        if (!s.ok()) return Error(StatusFor(s), std::string(s.message()));
        requested_sha_.erase(id);
        trash = TrashModel(id);
      }
      std::error_code ec;
      fs::remove_all(trash, ec);
      CollectBlobs();
      return {204, "application/json", ""};
    }
    return Error(405, "use GET or DELETE on /v1/models/{id}");
  }
  if (parts.size() == 5 && parts[3] == "leases") {
    const std::string& holder = parts[4];
    // The body is read before the agent's lock is taken.
    absl::Duration ttl = options_.default_lease_ttl;
    if (call.method == "PUT" && !call.body.empty()) {
      json b = json::parse(call.body, nullptr, false);
      if (b.is_discarded()) return Error(400, "invalid JSON body");
      if (!b.is_object()) return Error(400, "expected {\"ttlSeconds\": N}");
      absl::StatusOr<absl::Duration> t = LeaseTtl(b, "ttlSeconds", ttl);
      if (!t.ok()) return Error(400, std::string(t.status().message()));
      ttl = *t;
    }
    std::lock_guard<std::mutex> l(mu_);
    if (call.method == "PUT") {
      absl::Status s = index_.Lease(id, holder, ttl, Now());
      if (!s.ok()) return Error(StatusFor(s), std::string(s.message()));
      // Held in memory either way; a pod's renewal retries a lease the disk could not keep.
      if (absl::Status saved = LeaseNeedsSave(id, holder, ttl) ? SaveLeases() : absl::OkStatus();
          !saved.ok()) {
        return Error(507, absl::StrCat("lease held until this agent restarts, but not saved: ",
                                       saved.message()));
      }
      return Json(200, {{"holder", holder}, {"expiresAt", absl::FormatTime(Now() + ttl)}});
    }
    if (call.method == "DELETE") {
      if (!index_.Release(id, holder)) return Error(404, "no such lease");
      SaveLeases().IgnoreError();  // a released lease left on disk only lapses at its expiry
      return {204, "application/json", ""};
    }
    return Error(405, "use PUT or DELETE on a lease");
  }
  return Error(404, absl::StrCat("no such endpoint: ", call.method, " ", call.path));
}

}  // namespace tessera::services
