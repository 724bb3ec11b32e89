#include "adapters/objstore/fetcher.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "adapters/net/http_client.h"
#include "adapters/objstore/s3_list.h"
#include "adapters/objstore/verify.h"
#include "base/random.h"
#include "base/status.h"
#include "nlohmann/json.hpp"

namespace tessera::adapters::objstore {
namespace fs = std::filesystem;
namespace {

constexpr char kPartialSuffix[] = ".partial";
constexpr char kChunkLogSuffix[] = ".tessera-chunks";

std::string BaseUrl(const std::string& url) { return url.substr(0, url.rfind('/') + 1); }

const Clock& ClockOf(const FetchOptions& o) {
  static const RealClock real_clock;
  return o.clock != nullptr ? *o.clock : real_clock;
}

// SigV4 headers for a request to an S3 origin; none for HTTP origins and anonymous buckets.
absl::StatusOr<std::vector<std::string>> AuthHeaders(const S3Location* s3, const char* method,
                                                     const std::string& url,
                                                     const FetchOptions& o) {
  if (s3 == nullptr || s3->credentials.anonymous()) return std::vector<std::string>{};
  return SignV4(method, url, {}, kEmptySha256, s3->credentials, s3->region, "s3", ClockOf(o).Now());
}

absl::StatusOr<std::string> GetSmall(const std::string& url, const FetchOptions& o,
                                     const S3Location* s3 = nullptr) {
  HttpRequest req;
  req.url = url;
  req.timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(o.request_timeout));
  if (s3 != nullptr) req.tls.ca_file = s3->ca_file;
  absl::Status last;
  for (int attempt = 0; attempt < o.max_attempts; ++attempt) {
    TESSERA_ASSIGN_OR_RETURN(req.headers, AuthHeaders(s3, "GET", url, o));
    absl::StatusOr<HttpResponse> r = Fetch(req);
    if (r.ok() && r->status == 200) return r->body;
    if (absl::IsResourceExhausted(r.status())) return r.status();  // as large the next time
    std::string why = r.ok() ? S3ErrorSummary(r->body) : "";
    if (!why.empty()) why = absl::StrCat(" (", why, ")");
    last = r.ok() ? absl::UnavailableError(absl::StrCat("GET ", url, ": HTTP ", r->status, why))
                  : r.status();
    if (r.ok() && r->status >= 400 && r->status < 500 && r->status != 408 && r->status != 429) {
      return absl::NotFoundError(absl::StrCat("GET ", url, ": HTTP ", r->status, why));
    }
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(
        std::min(o.backoff_max, o.backoff_base * std::pow(2.0, attempt))));
  }
  return last;
}

// HEAD for the size (Content-Length).
absl::StatusOr<int64_t> RemoteSize(const std::string& url, const FetchOptions& o,
                                   const S3Location* s3) {
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<CURL, void (*)(CURL*)> h(curl_easy_init(), curl_easy_cleanup);
    curl_easy_setopt(h.get(), CURLOPT_URL, url.c_str());
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> auth, AuthHeaders(s3, "HEAD", url, o));
    std::unique_ptr<curl_slist, void (*)(curl_slist*)> hs(nullptr, curl_slist_free_all);
    for (const std::string& a : auth) hs.reset(curl_slist_append(hs.release(), a.c_str()));
    curl_easy_setopt(h.get(), CURLOPT_HTTPHEADER, hs.get());
    if (s3 != nullptr && !s3->ca_file.empty()) {
      curl_easy_setopt(h.get(), CURLOPT_CAINFO, s3->ca_file.c_str());
    }
    curl_easy_setopt(h.get(), CURLOPT_NOBODY, 1L);
    curl_easy_setopt(h.get(), CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h.get(), CURLOPT_TIMEOUT_MS,
                     static_cast<long>(absl::ToInt64Milliseconds(o.request_timeout)));
    CURLcode rc = curl_easy_perform(h.get());
    long status = 0;
    curl_off_t len = -1;
    curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(h.get(), CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
    if (rc == CURLE_OK && status == 200 && len >= 0) return static_cast<int64_t>(len);
    if (rc == CURLE_OK && status >= 400 && status < 500 && status != 408 && status != 429) {
      return absl::NotFoundError(absl::StrCat("HEAD ", url, ": HTTP ", status));
    }
    if (attempt + 1 >= o.max_attempts) {
      return absl::UnavailableError(
          absl::StrCat("HEAD ", url, ": ", rc != CURLE_OK ? curl_easy_strerror(rc) : "", " HTTP ",
                       status, len < 0 && status == 200 ? " without Content-Length" : ""));
    }
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(
        std::min(o.backoff_max, o.backoff_base * std::pow(2.0, attempt))));
  }
}

struct Chunk {
  int file = 0;
  int64_t index = 0;
  int64_t begin = 0;
  int64_t end = 0;  // exclusive
  int attempts = 0;
  absl::Time not_before = absl::InfinitePast();
};

// Pushes written chunks to the disk on its own thread (sync_file_range to start write-back, and
// fsync of a file once its last chunk is in), so that the transfers never wait on the disk and
// the fsync before the commit finds little left to do. The fds must stay open until Finish().
class Flusher {
 public:
  Flusher() : thread_([this] { Run(); }) {}
  ~Flusher() { Finish(); }
  void WriteBack(int fd, int64_t offset, int64_t len) { Push({fd, offset, len}); }
  void Fsync(int fd) { Push({fd, -1, 0}); }
  // Does everything queued, then stops.
  void Finish() {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (done_) return;
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  struct Op {
    int fd;
    int64_t offset;  // -1: fsync the file
    int64_t len;
  };
  void Push(Op op) {
    {
      std::lock_guard<std::mutex> l(mu_);
      queue_.push_back(op);
    }
    cv_.notify_one();
  }
  void Run() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [this] { return done_ || !queue_.empty(); });
      if (queue_.empty()) return;  // done_
      std::vector<Op> batch;
      batch.swap(queue_);
      l.unlock();
      for (const Op& op : batch) {
        if (op.offset < 0) {
          fsync(op.fd);
        } else {
          sync_file_range(op.fd, op.offset, op.len, SYNC_FILE_RANGE_WRITE);
        }
      }
      l.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Op> queue_;
  bool done_ = false;
  std::thread thread_;
};

// While a chunk arrives, write-back of what is written starts every this many bytes, so that
// the disk keeps pace with the network and the fsync before the commit finds little to do.
constexpr int64_t kWriteBackStep = 4 << 20;

struct Transfer {
  Chunk chunk;
  int fd = -1;
  Flusher* flusher = nullptr;
  int64_t written = 0;
  int64_t written_back = 0;  // bytes of the chunk handed to the flusher
  bool bad_write = false;
  int write_errno = 0;  // set when the local write failed
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> md{nullptr, EVP_MD_CTX_free};
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> headers{nullptr, curl_slist_free_all};
  std::string range;
  double retry_after_s = -1;
  std::string content_range;
};

size_t OnData(char* data, size_t size, size_t n, void* p) {
  auto* t = static_cast<Transfer*>(p);
  size_t len = size * n;
  int64_t room = (t->chunk.end - t->chunk.begin) - t->written;
  if (static_cast<int64_t>(len) > room) {
    t->bad_write = true;  // more than asked for (a server ignoring Range): abort
    return 0;
  }
  size_t off = 0;
  while (off < len) {
    ssize_t w = pwrite(t->fd, data + off, len - off, t->chunk.begin + t->written + off);
    if (w <= 0) {
      t->bad_write = true;
      t->write_errno = w < 0 ? errno : ENOSPC;
      return 0;
    }
    off += static_cast<size_t>(w);
  }
  EVP_DigestUpdate(t->md.get(), data, len);
  t->written += static_cast<int64_t>(len);
  if (t->written - t->written_back >= kWriteBackStep) {
    t->flusher->WriteBack(t->fd, t->chunk.begin + t->written_back, t->written - t->written_back);
    t->written_back = t->written;
  }
  return len;
}

size_t OnHeader(char* data, size_t size, size_t n, void* p) {
  auto* t = static_cast<Transfer*>(p);
  absl::string_view line(data, size * n);
  if (absl::StartsWithIgnoreCase(line, "retry-after:")) {
    double s = 0;
    if (absl::SimpleAtod(absl::StripAsciiWhitespace(line.substr(12)), &s)) t->retry_after_s = s;
  } else if (absl::StartsWithIgnoreCase(line, "content-range:")) {
    t->content_range = std::string(absl::StripAsciiWhitespace(line.substr(14)));
  }
  return size * n;
}

struct FileState {
  FileSpec spec;
  std::string staging;
  int fd = -1;
  int64_t chunks = 0;
  int64_t remaining = 0;
  std::ofstream log;
};

std::string ChunkHash(int fd, int64_t begin, int64_t end) {
  std::string buf(static_cast<size_t>(end - begin), '\0');
  ssize_t r = pread(fd, buf.data(), buf.size(), begin);
  if (r != static_cast<ssize_t>(buf.size())) return "";
  return Sha256Hex(buf);
}

absl::Status SyncDir(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", path));
  fsync(fd);
  close(fd);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<FileSpec>> ResolveS3(const std::string& source, const FetchOptions& o) {
  TESSERA_ASSIGN_OR_RETURN(S3Location parsed, ParseS3Source(source));
  auto loc = std::make_shared<const S3Location>(std::move(parsed));
  std::vector<S3Object> objects;
  std::string token;
  do {
    std::string url =
        absl::StrCat(loc->ObjectUrl(""), "?list-type=2&prefix=", UrlEscape(loc->prefix));
    if (!token.empty()) absl::StrAppend(&url, "&continuation-token=", UrlEscape(token));
    TESSERA_ASSIGN_OR_RETURN(std::string body, GetSmall(url, o, loc.get()));
    absl::StatusOr<S3ListPage> page = ParseListObjectsV2(body);
    if (!page.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("list s3://", loc->bucket, "/", loc->prefix, ": ", page.status().message()));
    }
    for (S3Object& obj : page->objects) objects.push_back(std::move(obj));
    token = page->truncated ? page->next_token : "";
  } while (!token.empty());
  std::vector<FileSpec> out;
  // The prefix names one object: fetch that object under its base name.
  for (const S3Object& obj : objects) {
    if (obj.key == loc->prefix && !loc->prefix.empty() && !absl::EndsWith(loc->prefix, "/")) {
      std::string name = obj.key.substr(obj.key.rfind('/') + 1);
      TESSERA_RETURN_IF_ERROR(ValidateRelativeName(name));
      return std::vector<FileSpec>{{name, loc->ObjectUrl(obj.key), obj.size, "", loc}};
    }
  }
  std::string dir = loc->prefix;
  if (!dir.empty() && !absl::EndsWith(dir, "/")) dir += "/";
  const FileSpec* manifest = nullptr;
  for (const S3Object& obj : objects) {
    if (!absl::StartsWith(obj.key, dir) || absl::EndsWith(obj.key, "/")) continue;  // markers
    std::string name = obj.key.substr(dir.size());
    absl::Status valid = ValidateRelativeName(name);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("s3://", loc->bucket, "/", obj.key, ": ", valid.message()));
    }
    out.push_back({name, loc->ObjectUrl(obj.key), obj.size, "", loc});
  }
  if (out.empty()) {
    return absl::NotFoundError(
        absl::StrCat("s3://", loc->bucket, "/", loc->prefix, ": no objects under this prefix"));
  }
  for (const FileSpec& f : out) {
    if (f.name == "tessera-manifest.json") manifest = &f;
  }
  if (manifest != nullptr) {
    // Checksums from our manifest beside the files; sizes must agree with the listing.
    // Read as strictly as an HTTP source's manifest; every file it lists must be in the bucket
    // (one missing is an upload that did not finish).
    TESSERA_ASSIGN_OR_RETURN(std::string body, GetSmall(manifest->url, o, loc.get()));
    TESSERA_ASSIGN_OR_RETURN(std::vector<FileSpec> listed, ParseManifest(manifest->url, body));
    std::map<std::string, FileSpec*> by_name;
    for (FileSpec& f : out) by_name[f.name] = &f;
    for (const FileSpec& m : listed) {
      auto it = by_name.find(m.name);
      if (it == by_name.end()) {
        return absl::InvalidArgumentError(absl::StrCat(manifest->url, ": lists ", m.name,
                                                       ", which is not under s3://", loc->bucket,
                                                       "/", loc->prefix));
      }
      if (m.size != it->second->size) {
        return absl::InvalidArgumentError(absl::StrCat(
            m.name, ": the manifest says ", m.size, " bytes, the bucket lists ", it->second->size));
      }
      it->second->sha256 = m.sha256;
    }
  }
  return out;
}

}  // namespace

absl::Status FillSizes(std::vector<FileSpec>* files, const FetchOptions& o) {
  for (FileSpec& f : *files) {
    if (f.size < 0) {
      TESSERA_ASSIGN_OR_RETURN(f.size, RemoteSize(f.url, o, f.s3.get()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<FileSpec>> ParseManifest(const std::string& source,
                                                    const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("files") || !j["files"].is_array() || j["files"].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected {\"files\": [{\"name\", \"size\", \"sha256\"}, ...]}"));
  }
  std::vector<FileSpec> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < j["files"].size(); ++i) {
    const nlohmann::json& f = j["files"][i];
    std::string at = absl::StrCat(source, ": files[", i, "]");
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("size") ||
        !f["size"].is_number_unsigned() || f["size"].get<uint64_t>() > INT64_MAX) {
      return absl::InvalidArgumentError(at + ": expected name (string) and size (bytes)");
    }
    FileSpec s;
    s.name = f["name"].get<std::string>();
    if (absl::Status valid = ValidateRelativeName(s.name); !valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(at, ": ", valid.message()));
    }
    if (!seen.insert(s.name).second) {
      return absl::InvalidArgumentError(at + ": duplicate name " + s.name);
    }
    s.size = f["size"].get<int64_t>();
    if (f.contains("sha256")) {
      const nlohmann::json& sum = f["sha256"];
      if (!sum.is_string() || !IsSha256Hex(sum.get<std::string>())) {
        return absl::InvalidArgumentError(at + ": sha256 must be 64 hex digits");
      }
      s.sha256 = absl::AsciiStrToLower(sum.get<std::string>());
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::vector<FileSpec>> ResolveSource(const std::string& source,
                                                    const FetchOptions& o) {
  if (absl::StartsWith(source, "s3://")) return ResolveS3(source, o);
  if (!absl::StartsWith(source, "http://") && !absl::StartsWith(source, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("source ", source, ": expected an http:// or https:// URL"));
  }
  std::string base = BaseUrl(source);
  std::string last = source.substr(base.size());
  if (last.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("source ", source, ": names no file"));
  }
  std::vector<FileSpec> out;
  if (absl::EndsWith(last, ".safetensors.index.json")) {
    TESSERA_ASSIGN_OR_RETURN(std::string body, GetSmall(source, o));
    nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": expected a safetensors index with a weight_map object"));
    }
    out.push_back({last, source, static_cast<int64_t>(body.size()), Sha256Hex(body), nullptr});
    std::set<std::string> shards;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": weight_map[\"", it.key(), "\"] is not a file name"));
      }
      shards.insert(it.value().get<std::string>());
    }
    for (const std::string& s : shards) {
      if (absl::Status valid = ValidateRelativeName(s); !valid.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": weight_map: ", valid.message()));
      }
      out.push_back({s, base + UrlEscape(s, /*keep_slash=*/true), -1, "", nullptr});
    }
    return out;
  }
  if (last == "tessera-manifest.json") {
    TESSERA_ASSIGN_OR_RETURN(std::string body, GetSmall(source, o));
    TESSERA_ASSIGN_OR_RETURN(out, ParseManifest(source, body));
    for (FileSpec& f : out) f.url = base + UrlEscape(f.name, /*keep_slash=*/true);
    return out;
  }
  TESSERA_RETURN_IF_ERROR(ValidateRelativeName(last));
  out.push_back({last, source, -1, "", nullptr});
  return out;
}

namespace {
absl::StatusOr<FetchStats> FetchOnce(const std::vector<FileSpec>& files, const std::string& dir,
                                     const FetchOptions& o, bool is_refetch);
}  // namespace

absl::StatusOr<FetchStats> FetchModel(const std::vector<FileSpec>& files, const std::string& dir,
                                      const FetchOptions& o) {
  return FetchOnce(files, dir, o, /*is_refetch=*/false);
}

namespace {
absl::StatusOr<FetchStats> FetchOnce(const std::vector<FileSpec>& files, const std::string& dir,
                                     const FetchOptions& o, bool is_refetch) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  const Clock& clock = ClockOf(o);
  const absl::Time started = clock.Now();
  absl::Time deadline = o.total_timeout == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                                                    : started + o.total_timeout;
  FetchStats stats;
  std::error_code ec;
  if (fs::is_directory(dir, ec)) {
    stats.already_complete = true;  // only a complete directory is ever renamed into place
    return stats;
  }
  const std::string staging = dir + kPartialSuffix;
  fs::create_directories(staging, ec);
  if (ec) return absl::InternalError(absl::StrCat("mkdir ", staging, ": ", ec.message()));
  Random rng(o.seed != 0 ? o.seed : static_cast<uint64_t>(absl::ToUnixNanos(started)));

  std::vector<FileState> st(files.size());
  std::vector<Chunk> queue;
  for (size_t i = 0; i < files.size(); ++i) {
    FileState& f = st[i];
    f.spec = files[i];
    TESSERA_RETURN_IF_ERROR(ValidateRelativeName(f.spec.name));
    if (f.spec.size < 0) {
      TESSERA_ASSIGN_OR_RETURN(f.spec.size, RemoteSize(f.spec.url, o, f.spec.s3.get()));
    }
    f.staging = staging + "/" + f.spec.name;
    fs::create_directories(fs::path(f.staging).parent_path(), ec);
    f.fd = open(f.staging.c_str(), O_RDWR | O_CREAT, 0644);
    if (f.fd < 0) return absl::InternalError(absl::StrCat("open ", f.staging));
    struct stat sb;
    fstat(f.fd, &sb);
    if (sb.st_size != f.spec.size && ftruncate(f.fd, f.spec.size) != 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot size ", f.staging, " to ", f.spec.size, " bytes (disk full?)"));
    }
    f.chunks = std::max<int64_t>(1, (f.spec.size + o.chunk_bytes - 1) / o.chunk_bytes);
    // Resume: chunks recorded as written by an earlier run count only if they still hash to
    // what was recorded.
    std::set<int64_t> done;
    {
      std::ifstream log(f.staging + kChunkLogSuffix);
      std::string line;
      while (std::getline(log, line)) {
        std::vector<std::string> parts = absl::StrSplit(line, ' ');
        int64_t idx = 0;
        if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &idx) || idx < 0 || idx >= f.chunks ||
            parts[1] != absl::StrCat(o.chunk_bytes)) {
          continue;
        }
        int64_t b = idx * o.chunk_bytes, e = std::min(f.spec.size, b + o.chunk_bytes);
        if (ChunkHash(f.fd, b, e) == parts[2]) {
          done.insert(idx);
        }
      }
    }
    f.log.open(f.staging + kChunkLogSuffix, std::ios::trunc);
    for (int64_t idx : done) {
      int64_t b = idx * o.chunk_bytes, e = std::min(f.spec.size, b + o.chunk_bytes);
      f.log << idx << " " << o.chunk_bytes << " " << ChunkHash(f.fd, b, e) << "\n";
      stats.resumed_bytes += e - b;
    }
    f.log.flush();
    for (int64_t idx = 0; idx < f.chunks; ++idx) {
      if (done.contains(idx) || f.spec.size == 0) continue;
      int64_t b = idx * o.chunk_bytes;
      queue.push_back({static_cast<int>(i), idx, b, std::min(f.spec.size, b + o.chunk_bytes)});
      ++f.remaining;
    }
    stats.total_bytes += f.spec.size;
  }

  std::unique_ptr<CURLM, void (*)(CURLM*)> multi(curl_multi_init(),
                                                 [](CURLM* m) { curl_multi_cleanup(m); });
  std::map<CURL*, std::unique_ptr<Transfer>> active;
  size_t next = 0;
  absl::Time last_report = absl::InfinitePast();
  Flusher flusher;
  auto start_one = [&](Chunk c) -> absl::Status {
    auto t = std::make_unique<Transfer>();
    const S3Location* s3 = st[c.file].spec.s3.get();
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> auth,
                             AuthHeaders(s3, "GET", st[c.file].spec.url, o));
    for (const std::string& a : auth)
      t->headers.reset(curl_slist_append(t->headers.release(), a.c_str()));
    t->chunk = c;
    t->fd = st[c.file].fd;
    t->flusher = &flusher;
    t->md.reset(EVP_MD_CTX_new());
    EVP_DigestInit_ex(t->md.get(), EVP_sha256(), nullptr);
    t->range = absl::StrCat(c.begin, "-", c.end - 1);
    CURL* h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, st[c.file].spec.url.c_str());
    curl_easy_setopt(h, CURLOPT_RANGE, t->range.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(absl::ToInt64Milliseconds(o.request_timeout)));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnData);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, t.get());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, t->headers.get());
    if (s3 != nullptr && !s3->ca_file.empty())
      curl_easy_setopt(h, CURLOPT_CAINFO, s3->ca_file.c_str());
    curl_multi_add_handle(multi.get(), h);
    active[h] = std::move(t);
    return absl::OkStatus();
  };
  std::vector<Chunk> waiting;  // retries not yet due
  absl::Status failure;
  while (failure.ok() && (next < queue.size() || !active.empty() || !waiting.empty())) {
    if (o.cancel != nullptr && o.cancel->load()) {
      failure = absl::CancelledError("fetch cancelled");
      break;
    }
    if (clock.Now() > deadline) {
      failure = absl::DeadlineExceededError(
          absl::StrCat("fetch did not finish within ", absl::FormatDuration(o.total_timeout)));
      break;
    }
    absl::Time now = clock.Now();
    for (size_t i = 0; i < waiting.size() && static_cast<int>(active.size()) < o.connections;) {
      if (waiting[i].not_before <= now) {
        failure = start_one(waiting[i]);
        waiting.erase(waiting.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    while (failure.ok() && next < queue.size() && static_cast<int>(active.size()) < o.connections) {
      failure = start_one(queue[next++]);
    }
    if (!failure.ok()) break;
    int running = 0;
    curl_multi_perform(multi.get(), &running);
    curl_multi_poll(multi.get(), nullptr, 0, 50, nullptr);
    curl_multi_perform(multi.get(), &running);
    CURLMsg* msg;
    int left = 0;
    while ((msg = curl_multi_info_read(multi.get(), &left)) != nullptr) {
      if (msg->msg != CURLMSG_DONE) continue;
      CURL* h = msg->easy_handle;
      std::unique_ptr<Transfer> t = std::move(active[h]);
      active.erase(h);
      long status = 0;
      curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
      CURLcode rc = msg->data.result;
      curl_multi_remove_handle(multi.get(), h);
      curl_easy_cleanup(h);
      stats.origin_bytes += t->written;
      Chunk c = t->chunk;
      FileState& f = st[c.file];
      int64_t want = c.end - c.begin;
      bool whole = c.begin == 0 && c.end == f.spec.size;
      bool ok = rc == CURLE_OK && !t->bad_write && t->written == want &&
                (status == 206 || (status == 200 && whole));
      if (ok) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned len = 0;
        EVP_DigestFinal_ex(t->md.get(), md, &len);
        // Write-back of the rest starts now, off this thread. The log needs no fdatasync: a
        // resume re-hashes every chunk it names, so a chunk whose bytes a power loss took is
        // refetched.
        flusher.WriteBack(f.fd, c.begin + t->written_back, want - t->written_back);
        f.log << c.index << " " << o.chunk_bytes << " "
              << absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(md), len))
              << "\n";
        f.log.flush();
        if (--f.remaining == 0) flusher.Fsync(f.fd);
        continue;
      }
      if (t->write_errno == ENOSPC || t->write_errno == EDQUOT) {
        failure = absl::ResourceExhaustedError(
            absl::StrCat("disk full writing ", f.staging, ": ", strerror(t->write_errno)));
        break;
      }
      if (rc == CURLE_OK && status >= 400 && status < 500 && status != 408 && status != 429) {
        failure = absl::NotFoundError(
            absl::StrCat("GET ", f.spec.url, " (", f.spec.name, "): HTTP ", status));
        break;
      }
      if (++c.attempts >= o.max_attempts) {
        failure = absl::UnavailableError(absl::StrCat(
            "GET ", f.spec.url, " bytes ", c.begin, "-", c.end - 1, ": gave up after ", c.attempts,
            " attempts; last: ",
            rc != CURLE_OK
                ? curl_easy_strerror(rc)
                : absl::StrCat("HTTP ", status, " with ", t->written, " of ", want, " bytes")));
        break;
      }
      ++stats.retries;
      // Exponential backoff with full jitter; Retry-After wins when the origin sent one.
      absl::Duration cap = std::min(o.backoff_max, o.backoff_base * std::pow(2.0, c.attempts));
      absl::Duration wait = cap * rng.UniformDouble();
      if (t->retry_after_s >= 0) wait = absl::Seconds(std::min(t->retry_after_s, 60.0));
      c.not_before = clock.Now() + wait;
      waiting.push_back(c);
    }
    if (o.progress && clock.Now() - last_report > absl::Milliseconds(200)) {
      last_report = clock.Now();
      double secs = absl::ToDoubleSeconds(last_report - started);
      FetchProgress p;
      p.bytes_total = stats.total_bytes;
      p.bytes_done = stats.resumed_bytes + stats.origin_bytes;
      p.bytes_per_second = secs > 0 ? stats.origin_bytes / secs : 0;
      p.files_total = static_cast<int>(files.size());
      o.progress(p);
    }
  }
  for (auto& [h, t] : active) {
    curl_multi_remove_handle(multi.get(), h);
    curl_easy_cleanup(h);
  }
  active.clear();
  if (!failure.ok()) {
    flusher.Finish();
    for (FileState& f : st) close(f.fd);
    return failure;  // DIR.partial is kept: the next run resumes from its verified chunks
  }

  flusher.Finish();
  // Verify every file, refetching once on a checksum mismatch.
  for (FileState& f : st) {
    fsync(f.fd);
    close(f.fd);
    f.fd = -1;
    f.log.close();
    struct stat sb;
    if (stat(f.staging.c_str(), &sb) != 0 || sb.st_size != f.spec.size) {
      return absl::DataLossError(absl::StrCat(f.spec.name, ": size differs from ", f.spec.size));
    }
    if (!f.spec.sha256.empty()) {
      TESSERA_ASSIGN_OR_RETURN(std::string got, Sha256File(f.staging));
      if (got != f.spec.sha256) {
        fs::remove(f.staging, ec);
        fs::remove(f.staging + kChunkLogSuffix, ec);
        if (is_refetch) {
          return absl::DataLossError(absl::StrCat(f.spec.name, ": sha256 ", got,
                                                  " does not match the expected ", f.spec.sha256,
                                                  " (refetched once; the origin serves other "
                                                  "bytes than the manifest describes)"));
        }
        for (FileState& other : st) other.log.close();
        absl::StatusOr<FetchStats> r = FetchOnce(files, dir, o, /*is_refetch=*/true);
        if (!r.ok()) {
          return absl::DataLossError(
              absl::StrCat(f.spec.name, ": sha256 mismatch; refetch: ", r.status().message()));
        }
        r->refetched_files += 1;
        r->retries += stats.retries;
        r->origin_bytes += stats.origin_bytes;
        return r;
      }
    }
    if (absl::EndsWith(f.spec.name, ".safetensors")) {
      TESSERA_RETURN_IF_ERROR(VerifySafetensors(f.staging));
    }
  }
  for (FileState& f : st) fs::remove(f.staging + kChunkLogSuffix, ec);
  TESSERA_RETURN_IF_ERROR(SyncDir(staging));
  fs::rename(staging, dir, ec);
  if (ec)
    return absl::InternalError(absl::StrCat("rename ", staging, " -> ", dir, ": ", ec.message()));
  TESSERA_RETURN_IF_ERROR(SyncDir(fs::path(dir).parent_path().empty()
                                      ? std::string(".")
                                      : fs::path(dir).parent_path().string()));
  stats.seconds = absl::ToDoubleSeconds(clock.Now() - started);
  if (o.progress) {
    o.progress({.bytes_done = stats.total_bytes,
                .bytes_total = stats.total_bytes,
                .bytes_per_second = stats.seconds > 0 ? stats.origin_bytes / stats.seconds : 0,
                .files_total = static_cast<int>(files.size())});
  }
  return stats;
}

}  // namespace

}  // namespace tessera::adapters::objstore
