// Test helpers for the weight-cache tests: temporary directories, generated safetensors files,
// and Debian's nginx on a free 127.0.0.1 port with an access log that counts the bytes served.
// Header-only; included by tests only.
#pragma once

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "adapters/io/test_scratch_dir.h"
#include "adapters/net/free_port.h"
#include "base/random.h"
#include "nlohmann/json.hpp"

namespace tessera::adapters::objstore::testing {

namespace fs = std::filesystem;

inline std::string TempDir() { return adapters::testing::NewScratchDir("fetch"); }

// A safetensors file: `tensors` F16 tensors of `elems` elements each, random bytes.
inline std::string Safetensors(int tensors, int64_t elems, uint64_t seed) {
  nlohmann::json h = {{"__metadata__", {{"format", "pt"}}}};
  int64_t off = 0;
  for (int i = 0; i < tensors; ++i) {
    h[absl::StrCat("model.layers.", i, ".weight")] = {
        {"dtype", "F16"}, {"shape", {elems / 64, 64}}, {"data_offsets", {off, off + elems * 2}}};
    off += elems * 2;
  }
  std::string header = h.dump();
  while ((8 + header.size()) % 8 != 0) header.push_back(' ');
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += header;
  Random rng(seed);
  for (int64_t i = 0; i < off; ++i) out.push_back(static_cast<char>(rng.UniformInt(0, 255)));
  return out;
}

inline void Write(const std::string& path, const std::string& data) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << data;
}

inline std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline int FreePort() { return FreeLoopbackPort(); }

// nginx serving `root`, logging "status bytes uri range" per request.
class Nginx {
 public:
  explicit Nginx(const std::string& root, const std::string& server_extra = "")
      : dir_(TempDir()), port_(FreePort()) {
    std::ofstream(dir_ + "/nginx.conf")
        << "daemon off;\nworker_processes 1;\nuser root;\npid " << dir_ << "/nginx.pid;\n"
        << "error_log " << dir_ << "/error.log;\nevents {}\nhttp {\n"
        << "  log_format bytes '$status $body_bytes_sent $uri $http_range';\n"
        << "  access_log " << dir_ << "/access.log bytes;\n"
        << "  client_body_temp_path " << dir_ << "/body;\n  proxy_temp_path " << dir_
        << "/proxy;\n  fastcgi_temp_path " << dir_ << "/fcgi;\n  uwsgi_temp_path " << dir_
        << "/uwsgi;\n  scgi_temp_path " << dir_ << "/scgi;\n"
        << "  server { listen 127.0.0.1:" << port_ << "; root " << root << "; " << server_extra
        << " }\n}\n";
    pid_ = fork();
    if (pid_ == 0) {
      freopen((dir_ + "/stderr").c_str(), "w", stderr);
      execlp("nginx", "nginx", "-c", (dir_ + "/nginx.conf").c_str(), "-p", dir_.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 400; ++i) {
      httplib::Client c("127.0.0.1", port_);
      if (c.Get("/")) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~Nginx() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    fs::remove_all(dir_);
  }
  std::string url(const std::string& path) const {
    return absl::StrCat("http://127.0.0.1:", port_, "/", path);
  }
  // Body bytes nginx sent for `uri`, over all requests.
  int64_t BytesServed(const std::string& uri) const {
    int64_t total = 0;
    std::ifstream in(dir_ + "/access.log");
    std::string line;
    while (std::getline(in, line)) {
      std::vector<std::string> f = absl::StrSplit(line, ' ');
      int64_t b = 0;
      if (f.size() >= 3 && f[2] == uri && absl::SimpleAtoi(f[1], &b)) total += b;
    }
    return total;
  }

 private:
  std::string dir_;
  int port_;
  pid_t pid_ = -1;
};

// npm's s3rver (installed by scripts/setup-deps under .deps/npm) on a free 127.0.0.1 port, with
// one bucket. Its credentials are S3RVER / S3RVER. It checks the form of a SigV4 Authorization
// header, the access key and the clock skew, but not the signature itself (s3rver 3.7.1).
class S3rver {
 public:
  explicit S3rver(const std::string& bucket) : dir_(TempDir()), port_(FreePort()) {
    const char* src = std::getenv("TESSERA_SOURCE_DIR");
    std::string bin =
        std::string(src != nullptr ? src : ".") + "/.deps/npm/node_modules/.bin/s3rver";
    available_ = fs::exists(bin);
    if (!available_) return;
    pid_ = fork();
    if (pid_ == 0) {
      freopen((dir_ + ".log").c_str(), "w", stdout);
      freopen((dir_ + ".log").c_str(), "a", stderr);
      std::string port = std::to_string(port_);
      execlp("node", "node", bin.c_str(), "-d", dir_.c_str(), "-a", "127.0.0.1", "-p", port.c_str(),
             "--configure-bucket", bucket.c_str(), nullptr);
      _exit(127);
    }
    // node takes a few seconds to start on a loaded 2-core machine; give it 30.
    for (int i = 0; i < 600 && !ready_; ++i) {
      httplib::Client c("127.0.0.1", port_);
      if (auto r = c.Get("/" + bucket + "?list-type=2"); r && r->status == 200) ready_ = true;
      if (!ready_) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~S3rver() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    fs::remove_all(dir_);
    fs::remove(dir_ + ".log");
  }
  bool available() const { return available_; }
  bool ready() const { return ready_; }
  std::string endpoint() const { return absl::StrCat("http://127.0.0.1:", port_); }

 private:
  std::string dir_;
  int port_;
  pid_t pid_ = -1;
  bool available_ = false;
  bool ready_ = false;
};

}  // namespace tessera::adapters::objstore::testing
