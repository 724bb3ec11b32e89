// File I/O for the CLI: reading input files, and writing an output directory atomically (all
// files appear together or none do; an existing directory is replaced only after the new one
// is complete).
//
// Example:
//   OutputDir out;
//   out.Add("plan.json", json);
//   out.Add("deployments/a.yaml", yaml);
//   TESSERA_RETURN_IF_ERROR(out.Commit("/tmp/plan"));
#pragma once

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::adapters {

// The whole file; NotFound / PermissionDenied / Internal naming the path.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// `text` without a leading UTF-8 byte-order mark (EF BB BF), which spreadsheet exports put before
// a CSV header; line and column numbers of what follows are unchanged.
absl::string_view WithoutUtf8Bom(absl::string_view text);

// A credential kept in a file (a service-account token, a password from a mounted Secret): the
// contents without the surrounding whitespace editors and `kubectl create secret` leave. Callers
// re-read it on every use, so a rotated credential applies at once. Errors as ReadFile's; they
// never contain the contents.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

// Writes `content` to `path` through a temporary sibling and a rename: readers see the old file
// or the new one, never a part. A file replaced keeps its permission bits.
absl::Status WriteFileAtomically(const std::string& path, const std::string& content);

// Whether WriteFileAtomically(path, ...) could write there now: `path` is no directory, its
// directory exists, and a temporary sibling can be created in it (created and removed again;
// one left by an interrupted write is opened, not removed). Commands that run for minutes check
// their output path with it before they start, so a mistyped path costs nothing.
absl::Status CheckWritable(const std::string& path);

class OutputDir {
 public:
  // Adds a file at a relative path (subdirectories allowed; ".." and absolute paths are not).
  void Add(std::string relative_path, std::string content, bool executable = false);
  // Writes every file into a fresh temporary sibling of `dir`, flushes them, then renames it
  // into place (replacing an existing `dir`). On failure `dir` is untouched and the temporary
  // directory removed.
  absl::Status Commit(const std::string& dir) const;

 private:
  struct File {
    std::string content;
    bool executable = false;
  };
  std::map<std::string, File> files_;
};

}  // namespace tessera::adapters
