// The fetcher against real origins on 127.0.0.1: Debian's nginx serving generated
// safetensors-shaped files (Range support, access log to count the bytes it served), and a
// fault-injecting origin (cpp-httplib) that answers 503 with Retry-After, 500, short bodies or
// stops serving, for retries and resume.
#include "adapters/objstore/fetcher.h"

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "adapters/net/free_port.h"
#include "adapters/net/test_http_server.h"
#include "adapters/objstore/test_origins.h"
#include "adapters/objstore/verify.h"
#include "base/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tessera::adapters::objstore {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace ::tessera::adapters::objstore::testing;  // NOLINT

// An origin with Range support that misbehaves on purpose.
class FaultyOrigin {
 public:
  // What the origin serves, by path. Guarded: the server's threads read it while a test sets it.
  void Set(const std::string& path, std::string data) {
    std::lock_guard<std::mutex> lock(mu_);
    files_[path] = std::make_shared<const std::string>(std::move(data));
  }
  std::string Get(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    return *files_.at(path);
  }
  std::atomic<int> requests{0};
  // Every Nth distinct request (method, path and Range) is answered 503 + Retry-After: 0 on its
  // first two attempts, then served. Counted per request rather than over all requests, so that
  // which chunk fails cannot depend on how the client's connections interleave: a global "every
  // Nth request" could hand one chunk's retries the failing turns six times in a row.
  std::atomic<int> fail_every{0};
  std::atomic<int> serve_at_most{-1};  // after this many good requests: 500 for ever
  std::atomic<int64_t> bytes{0};

  FaultyOrigin() {
    server_ = std::make_unique<adapters::testing::LocalHttpServer>([this](httplib::Server& s) {
      s.Get(R"(/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
        ++requests;
        if (fail_every > 0 && FailsThisAttempt(req)) {
          res.status = 503;
          res.set_header("Retry-After", "0");
          return;
        }
        if (serve_at_most >= 0 && good_ >= serve_at_most) {
          res.status = 500;
          return;
        }
        std::shared_ptr<const std::string> file;  // the request's own hold: Set may replace it
        {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = files_.find(req.matches[1].str());
          if (it == files_.end()) {
            res.status = 404;
            return;
          }
          file = it->second;
        }
        const std::string& data = *file;
        ++good_;
        // cpp-httplib answers the Range itself (206 and Content-Range) from the whole body.
        if (req.method == "HEAD") {
          // no body
        } else if (req.ranges.empty()) {
          bytes += static_cast<int64_t>(data.size());
        } else {
          auto [b, e] = req.ranges[0];
          if (e < 0 || e >= static_cast<ssize_t>(data.size())) {
            e = static_cast<ssize_t>(data.size()) - 1;
          }
          bytes += e - b + 1;
        }
        res.set_content(data, "application/octet-stream");
      });
      s.set_payload_max_length(size_t{1} << 30);
    });
  }
  std::string url(const std::string& path) const { return server_->url("/" + path); }

 private:
  bool FailsThisAttempt(const httplib::Request& req) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, first] = attempts_.try_emplace(
        absl::StrCat(req.method, " ", req.path, " ", req.get_header_value("Range")), 0, false);
    auto& [attempt, fails] = it->second;
    if (first) fails = ++distinct_ % fail_every == 0;
    return fails && ++attempt <= 2;
  }

  std::atomic<int> good_{0};
  std::mutex mu_;
  int distinct_ = 0;                                      // guarded by mu_
  std::map<std::string, std::pair<int, bool>> attempts_;  // guarded by mu_: attempts, fails
  std::map<std::string, std::shared_ptr<const std::string>> files_;  // guarded by mu_
  std::unique_ptr<adapters::testing::LocalHttpServer> server_;       // last: stopped first
};

FetchOptions Small() {
  FetchOptions o;
  o.connections = 4;
  o.chunk_bytes = 64 << 10;
  o.backoff_base = absl::Milliseconds(5);
  o.backoff_max = absl::Milliseconds(50);
  o.seed = 1;
  return o;
}

TEST(Fetcher, ShardedSafetensorsFromNginxEachByteOnce) {
  std::string www = TempDir();
  nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                          {"weight_map", nlohmann::json::object()}};
  std::vector<std::string> shards;
  for (int s = 1; s <= 3; ++s) {
    std::string name = absl::StrCat("model-0000", s, "-of-00003.safetensors");
    Write(absl::StrCat(www, "/m/", name), Safetensors(4, int64_t{64} * 1024, s));  // 512 KiB each
    for (int t = 0; t < 4; ++t) index["weight_map"][absl::StrCat("l", s, ".", t)] = name;
    shards.push_back(name);
  }
  Write(www + "/m/model.safetensors.index.json", index.dump());
  Nginx nginx(www);
  FetchOptions o = Small();
  absl::StatusOr<std::vector<FileSpec>> files =
      ResolveSource(nginx.url("m/model.safetensors.index.json"), o);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 4u);
  std::string out = TempDir() + "/model";
  absl::StatusOr<FetchStats> s = FetchModel(*files, out, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(fs::exists(out + ".partial"));
  for (const std::string& name : shards) {
    EXPECT_EQ(Read(absl::StrCat(out, "/", name)), Read(absl::StrCat(www, "/m/", name))) << name;
    EXPECT_TRUE(VerifySafetensors(absl::StrCat(out, "/", name)).ok());
    // nginx's access log: every byte of the shard sent exactly once.
    EXPECT_EQ(nginx.BytesServed("/m/" + name),
              static_cast<int64_t>(fs::file_size(absl::StrCat(out, "/", name))))
        << name;
  }
  // A second fetch finds the directory complete and asks the origin nothing.
  absl::StatusOr<FetchStats> again = FetchModel(*files, out, o);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_complete);
}

TEST(Fetcher, ManifestChecksumsAndAMismatchIsRefetchedOnceThenAnError) {
  FaultyOrigin origin;
  origin.Set("w/a.bin", std::string(300000, 'a'));
  origin.Set("w/sub/b.safetensors", Safetensors(2, 4096, 9));
  nlohmann::json manifest = {
      {"files",
       {{{"name", "a.bin"}, {"size", 300000}, {"sha256", Sha256Hex(origin.Get("w/a.bin"))}},
        {{"name", "sub/b.safetensors"},
         {"size", origin.Get("w/sub/b.safetensors").size()},
         {"sha256", Sha256Hex(origin.Get("w/sub/b.safetensors"))}}}}};
  origin.Set("w/tessera-manifest.json", manifest.dump());
  FetchOptions o = Small();
  auto files = ResolveSource(origin.url("w/tessera-manifest.json"), o);
  ASSERT_TRUE(files.ok()) << files.status();
  std::string out = TempDir() + "/m";
  absl::StatusOr<FetchStats> s = FetchModel(*files, out, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Read(out + "/sub/b.safetensors"), origin.Get("w/sub/b.safetensors"));

  // The origin now serves other bytes than the manifest says.
  manifest["files"][0]["sha256"] = std::string(64, '0');
  origin.Set("w/tessera-manifest.json", manifest.dump());
  files = ResolveSource(origin.url("w/tessera-manifest.json"), o);
  ASSERT_TRUE(files.ok());
  std::string out2 = TempDir() + "/m";
  int64_t before = origin.bytes;
  s = FetchModel(*files, out2, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.status().message(), HasSubstr("refetched once"));
  EXPECT_FALSE(fs::exists(out2));  // never a directory with a bad file in it
  // a.bin fetched twice (first try and the one refetch), b once then reused from the chunks.
  EXPECT_LE(
      origin.bytes - before,
      int64_t{2} * 300000 + static_cast<int64_t>(origin.Get("w/sub/b.safetensors").size()) + 1000);
}

TEST(Fetcher, RetriesHonourRetryAfterAndResumeFetchesOnlyWhatIsMissing) {
  FaultyOrigin origin;
  const int64_t size = 4 << 20;  // 64 chunks of 64 KiB
  std::string data;
  Random rng(3);
  for (int64_t i = 0; i < size; ++i) data.push_back(static_cast<char>(rng.UniformInt(0, 255)));
  origin.Set("big.bin", data);
  FetchOptions o = Small();
  auto files = ResolveSource(origin.url("big.bin"), o);
  ASSERT_TRUE(files.ok());
  std::string out = TempDir() + "/big";

  // Every third chunk answered 503 twice: retried, and the result is intact.
  origin.fail_every = 3;
  absl::StatusOr<FetchStats> s = FetchModel(*files, out, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GT(s->retries, 10);
  EXPECT_EQ(Read(out + "/big.bin"), data);

  // An origin that dies after 20 chunks: the fetch fails and keeps what it verified...
  FaultyOrigin dying;
  dying.Set("big.bin", data);
  dying.serve_at_most = 21;  // the HEAD and 20 chunks
  std::string out2 = TempDir() + "/big";
  o.max_attempts = 2;
  auto dying_files = ResolveSource(dying.url("big.bin"), o);
  s = FetchModel(*dying_files, out2, o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("gave up"));
  EXPECT_FALSE(fs::exists(out2));
  EXPECT_TRUE(fs::exists(out2 + ".partial/big.bin"));
  // ...and a later run resumes: it fetches at most 1.1x the missing bytes.
  FaultyOrigin healthy;
  healthy.Set("big.bin", data);
  auto files2 = ResolveSource(healthy.url("big.bin"), o);
  s = FetchModel(*files2, out2, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GE(s->resumed_bytes, 15 * 65536);
  int64_t missing = size - s->resumed_bytes;
  EXPECT_LE(healthy.bytes.load(), missing * 11 / 10);
  EXPECT_EQ(Read(out2 + "/big.bin"), data);
}

TEST(Fetcher, ManifestIsReadStrictly) {
  struct Case {
    std::string body, want;
  } cases[] = {
      {"[]", "m.json: expected {\"files\": [{\"name\", \"size\", \"sha256\"}, ...]}"},
      {R"({"files": []})", "m.json: expected {\"files\""},
      {R"({"files": [{"name": "a", "size": -1}]})", "m.json: files[0]: expected name (string)"},
      {R"({"files": [{"name": "a", "size": 1.5}]})", "m.json: files[0]: expected name (string)"},
      {R"({"files": [{"name": "a", "size": 1}, {"name": "a", "size": 1}]})",
       "m.json: files[1]: duplicate name a"},
      {R"({"files": [{"name": "../a", "size": 1}]})", "m.json: files[0]: unsafe file name"},
      {R"({"files": [{"name": "a", "size": 1, "sha256": "abc"}]})",
       "m.json: files[0]: sha256 must be 64 hex digits"},
      // 64 characters, not hex: formerly accepted, to fail later as a checksum mismatch.
      {R"({"files": [{"name": "a", "size": 1, "sha256": ")" + std::string(64, 'z') + "\"}]}",
       "m.json: files[0]: sha256 must be 64 hex digits"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<FileSpec>> m = ParseManifest("m.json", c.body);
    ASSERT_FALSE(m.ok()) << c.body;
    EXPECT_THAT(m.status().message(), HasSubstr(c.want)) << c.body;
  }
  absl::StatusOr<std::vector<FileSpec>> m =
      ParseManifest("m.json", R"({"files": [{"name": "d/a.bin", "size": 3, "sha256": ")" +
                                  std::string(64, 'A') + R"("}, {"name": "b.bin", "size": 0}]})");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].name, "d/a.bin");
  EXPECT_EQ((*m)[0].size, 3);
  EXPECT_EQ((*m)[0].sha256, std::string(64, 'a'));
  EXPECT_EQ((*m)[1].sha256, "");
}

TEST(Fetcher, UntrustedNamesAndMissingFiles) {
  FaultyOrigin origin;
  for (const char* bad : {"../etc/passwd", "/abs", "a\\\\b", "a//b", "./x", "x/.."}) {
    origin.Set("m/tessera-manifest.json",
               nlohmann::json{{"files", {{{"name", bad}, {"size", 1}}}}}.dump());
    auto r = ResolveSource(origin.url("m/tessera-manifest.json"), Small());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("unsafe file name")) << bad;
  }
  // A size beyond what a file can have (it would read as negative bytes) is refused.
  origin.Set("m/tessera-manifest.json",
             R"({"files": [{"name": "a.bin", "size": 18446744073709551615}]})");
  auto huge = ResolveSource(origin.url("m/tessera-manifest.json"), Small());
  EXPECT_THAT(huge.status().message(), HasSubstr("files[0]: expected name (string) and size"));
  origin.Set("i/model.safetensors.index.json", R"({"weight_map": {"a": "../../x.safetensors"}})");
  EXPECT_THAT(
      ResolveSource(origin.url("i/model.safetensors.index.json"), Small()).status().message(),
      HasSubstr("model.safetensors.index.json: weight_map: unsafe file name"));
  auto missing = ResolveSource(origin.url("nothing.bin"), Small());
  ASSERT_TRUE(missing.ok());
  auto s = FetchModel(*missing, TempDir() + "/x", Small());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound) << s.status();
  EXPECT_EQ(ResolveSource("s3://Not_A_Bucket/prefix/", Small()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveSource("ftp://x/y", Small()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Verify, Sha256Hex) {
  EXPECT_TRUE(IsSha256Hex(Sha256Hex("abc")));
  EXPECT_TRUE(IsSha256Hex(std::string(64, 'F')));
  EXPECT_FALSE(IsSha256Hex(std::string(63, 'a')));
  EXPECT_FALSE(IsSha256Hex(std::string(65, 'a')));
  EXPECT_FALSE(IsSha256Hex(std::string(64, 'g')));
  EXPECT_FALSE(IsSha256Hex(std::string(63, 'a') + '\xe9'));
}

TEST(Verify, SafetensorsStructure) {
  std::string dir = TempDir();
  std::string good = Safetensors(3, 128, 1);
  Write(dir + "/good.safetensors", good);
  EXPECT_TRUE(VerifySafetensors(dir + "/good.safetensors").ok());
  // Truncated buffer: the last tensor runs past the end.
  Write(dir + "/short.safetensors", good.substr(0, good.size() - 10));
  EXPECT_THAT(VerifySafetensors(dir + "/short.safetensors").message(), HasSubstr("outside"));
  // Extra bytes: a hole at the end.
  Write(dir + "/long.safetensors", good + "xx");
  EXPECT_THAT(VerifySafetensors(dir + "/long.safetensors").message(), HasSubstr("end at byte"));
  // Header size beyond the file.
  std::string huge = good;
  huge[0] = '\xff';
  huge[1] = '\xff';
  huge[2] = '\x0f';
  Write(dir + "/huge.safetensors", huge);
  EXPECT_FALSE(VerifySafetensors(dir + "/huge.safetensors").ok());
  auto with_header = [&](const nlohmann::json& h, size_t buffer) {
    std::string header = h.dump();
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    Write(dir + "/x.safetensors", out + header + std::string(buffer, '\0'));
    return VerifySafetensors(dir + "/x.safetensors");
  };
  EXPECT_THAT(with_header({{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 4}}}}}, 4)
                  .message(),
              HasSubstr("need 8"));
  EXPECT_THAT(with_header({{"a", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}}},
                           {"b", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {2, 6}}}}},
                          6)
                  .message(),
              HasSubstr("overlap"));
  EXPECT_THAT(with_header({{"a", {{"dtype", "Q4"}, {"shape", {1}}, {"data_offsets", {0, 1}}}}}, 1)
                  .message(),
              HasSubstr("unknown dtype"));
  EXPECT_TRUE(
      with_header({{"a", {{"dtype", "BF16"}, {"shape", {0, 5}}, {"data_offsets", {0, 0}}}}}, 0)
          .ok());
  // 2^62 elements fit in 64 bits; at 8 bytes each they do not: refused as such, not wrapped.
  EXPECT_THAT(with_header({{"a",
                            {{"dtype", "F64"},
                             {"shape", {uint64_t{1} << 31, uint64_t{1} << 31}},
                             {"data_offsets", {0, 0}}}}},
                          0)
                  .message(),
              HasSubstr("shape overflows at its dtype's size"));
}

}  // namespace
}  // namespace tessera::adapters::objstore
