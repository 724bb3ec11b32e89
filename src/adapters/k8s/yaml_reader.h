// Strict, located reading of YAML (and JSON, which yaml-cpp reads as YAML) for Tessera's
// decoders: every error names the file, the line and column, the field path and what was
// expected, e.g.
//   workloads.yaml:12:16: workloads[2].gpuMemory: invalid byte quantity "18Gx": ...
// Exceptions from yaml-cpp are caught here and never leave this file's functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "yaml-cpp/yaml.h"

namespace tessera::adapters {

// Parses every document of `text` (YAML stream or JSON). Errors: InvalidArgument with
// "file:line:col: message".
absl::StatusOr<std::vector<YAML::Node>> ParseYamlDocuments(absl::string_view file,
                                                           absl::string_view text);

// Sets scalar entries of one map in a YAML text and keeps every other byte (comments, order,
// quoting, line endings): the map is item `index` (from 0) of the list under the top-level key
// `list_key` of the text's first document. An entry present gets its value replaced; one absent
// is added after the map's last entry whose value is a one-line scalar, as a line at the
// entries' indentation (in a flow map, before its '}'). Values are written as given: each must
// be a plain YAML scalar. Errors (InvalidArgument, "file[:line:col]: ..."): no such list or item,
// an item that is not a map, an entry to set whose value is not a scalar (a list, a map, an
// alias), a block map with no one-line scalar entry to add after, or a result that is not YAML.
absl::StatusOr<std::string> SetListItemScalars(
    absl::string_view file, absl::string_view text, absl::string_view list_key, size_t index,
    const std::vector<std::pair<std::string, std::string>>& values);

// `node` written out as YAML in one form (no comments, flow and block styles as yaml-cpp emits
// them; a map's keys in their order), without the map key `drop_key` when it is not empty: two
// texts that differ only in layout and comments give the same string.
std::string CanonicalYaml(const YAML::Node& node, absl::string_view drop_key = "");

// A node with its file and field path, for located errors.
class Field {
 public:
  Field(std::string file, YAML::Node node, std::string path)
      : file_(std::move(file)), node_(std::move(node)), path_(std::move(path)) {}

  const YAML::Node& node() const { return node_; }
  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  int line() const;  // 1-based
  bool present() const { return node_.IsDefined() && !node_.IsNull(); }

  // Where this field is: "file:line:col: path" (an absent one at the nearest map there).
  std::string Location() const;
  // An error at this field: "file:line:col: path: message".
  absl::Status Error(absl::string_view message) const;

  // Child of a map; absent children are not present() (no error until read). An error at an
  // absent field points at the nearest enclosing map that is there.
  Field Get(absl::string_view key) const;
  // Elements of a sequence (error if present and not a sequence).
  absl::StatusOr<std::vector<Field>> Items() const;
  // Fails when this map has keys other than `allowed` (names the key and the allowed ones).
  absl::Status OnlyKeys(const std::vector<std::string>& allowed) const;
  absl::Status RequireMap() const;

  absl::StatusOr<std::string> String() const;  // required scalar
  absl::StatusOr<std::string> StringOr(std::string dflt) const;
  absl::StatusOr<int64_t> Int(int64_t min, int64_t max) const;  // required integer in range
  absl::StatusOr<std::optional<int64_t>> OptionalInt(int64_t min, int64_t max) const;
  absl::StatusOr<std::optional<double>> OptionalNumber(double min, double max) const;

 private:
  std::string file_;
  YAML::Node node_;
  std::string path_;
  // For a missing child: the nearest enclosing map there, so its error points at it.
  YAML::Node parent_mark_node_;
};

}  // namespace tessera::adapters
