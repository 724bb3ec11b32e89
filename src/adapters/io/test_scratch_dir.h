// Test helper: directories of a test's own under $TMPDIR (else /tmp), removed with everything in
// them, so that no test run leaves files behind.
//
// Example:
//   ScratchDir dir("scaler");            // $TMPDIR/tessera-scaler-XXXXXX, removed at scope end
//   std::ofstream(dir.path() + "/config.yaml") << ...;
//
//   std::string d = NewScratchDir("extender");  // removed when the test process exits
//
// Only the process that made a directory removes it: a server forked by a test that exits
// through exit() runs the destructors of its copies, and must not delete the test's files.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tessera::adapters::testing {

class ScratchDir {
 public:
  // Inside `parent` when given, else in $TMPDIR (or /tmp). Aborts the test process when it
  // cannot be made.
  explicit ScratchDir(absl::string_view prefix, absl::string_view parent = "") : owner_(getpid()) {
    std::string base(parent);
    if (base.empty()) {
      const char* tmp = getenv("TMPDIR");
      base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    }
    std::string name = absl::StrCat(base, "/tessera-", prefix, "-XXXXXX");
    if (mkdtemp(name.data()) == nullptr) {
      // No test can go on without it, and an empty path would put its files under /.
      std::fprintf(stderr, "ScratchDir: mkdtemp %s: %s\n", name.c_str(), std::strerror(errno));
      std::abort();
    }
    path_ = std::move(name);
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty() && getpid() == owner_) std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }

  // Keeps the directory when this goes; returns its path.
  std::string Release() {
    std::string out = std::move(path_);
    path_.clear();
    return out;
  }

 private:
  std::string path_;
  pid_t owner_;
};

// A fresh directory that lives until the test process exits, for helpers whose paths outlive
// any one scope (a kubeconfig a server reads for the rest of its test). All of a process's are
// made inside one ScratchDir, removed at exit.
inline std::string NewScratchDir(absl::string_view prefix) {
  static ScratchDir root("run");
  return ScratchDir(prefix, root.path()).Release();
}

}  // namespace tessera::adapters::testing
