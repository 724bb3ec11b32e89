#include "adapters/k8s/yaml_reader.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::adapters {
namespace {

std::string Where(absl::string_view file, const YAML::Mark& mark) {
  if (mark.is_null()) {
    return std::string(file);
  }
  return absl::StrCat(file, ":", mark.line + 1, ":", mark.column + 1);
}

const char* TypeName(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Undefined:
      return "missing";
  }
  return "?";
}

}  // namespace

absl::StatusOr<std::vector<YAML::Node>> ParseYamlDocuments(absl::string_view file,
                                                           absl::string_view text) {
  try {
    std::vector<YAML::Node> docs = YAML::LoadAll(std::string(text));
    std::vector<YAML::Node> out;
    for (YAML::Node& d : docs) {
      if (d.IsDefined() && !d.IsNull()) {
        out.push_back(d);
      }
    }
    return out;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(file, e.mark), ": malformed YAML/JSON: ", e.msg));
  }
}

int Field::line() const {
  try {
    return node_.Mark().is_null() ? 0 : node_.Mark().line + 1;
  } catch (const YAML::Exception&) {
    return 0;
  }
}

absl::Status Field::Error(absl::string_view message) const {
  YAML::Mark mark = YAML::Mark::null_mark();
  try {
    if (node_.IsDefined()) {
      mark = node_.Mark();
    } else if (parent_mark_node_.IsDefined()) {
      mark = parent_mark_node_.Mark();
    }
  } catch (const YAML::Exception&) {
  }
  return absl::InvalidArgumentError(
      absl::StrCat(Where(file_, mark), ": ", path_.empty() ? "document" : path_, ": ", message));
}

Field Field::Get(absl::string_view key) const {
  std::string path = path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
  if (!node_.IsMap()) {
    return Field(file_, YAML::Node(YAML::NodeType::Undefined), path);
  }
  try {
    // Look the key up without inserting it (operator[] on a const node).
    const YAML::Node& self = node_;
    YAML::Node child = self[std::string(key)];
    if (!child.IsDefined()) {
      // Keep the parent's mark so a "missing" error points at the enclosing map.
      Field missing(file_, YAML::Node(YAML::NodeType::Undefined), path);
      missing.parent_mark_node_ = node_;
      return missing;
    }
    return Field(file_, child, path);
  } catch (const YAML::Exception&) {
    return Field(file_, YAML::Node(YAML::NodeType::Undefined), path);
  }
}

absl::Status Field::RequireMap() const {
  if (!node_.IsMap()) {
    return Error(absl::StrCat("expected a map, found ", TypeName(node_)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Field>> Field::Items() const {
  std::vector<Field> out;
  if (!present()) {
    return out;
  }
  if (!node_.IsSequence()) {
    return Error(absl::StrCat("expected a list, found ", TypeName(node_)));
  }
  for (size_t i = 0; i < node_.size(); ++i) {
    out.emplace_back(file_, node_[i], absl::StrCat(path_, "[", i, "]"));
  }
  return out;
}

absl::Status Field::OnlyKeys(const std::vector<std::string>& allowed) const {
  if (!node_.IsMap()) {
    return RequireMap();
  }
  for (const auto& kv : node_) {
    std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      Field at(file_, kv.first, path_.empty() ? key : absl::StrCat(path_, ".", key));
      return at.Error(absl::StrCat("unknown field \"", key,
                                   "\" (expected one of: ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Field::String() const {
  if (!present()) {
    return Error("required field is missing");
  }
  if (!node_.IsScalar()) {
    return Error(absl::StrCat("expected a string, found ", TypeName(node_)));
  }
  return node_.Scalar();
}

absl::StatusOr<std::string> Field::StringOr(std::string dflt) const {
  if (!present()) {
    return dflt;
  }
  return String();
}

absl::StatusOr<int64_t> Field::Int(int64_t min, int64_t max) const {
  if (!present()) {
    return Error("required field is missing");
  }
  absl::StatusOr<std::optional<int64_t>> v = OptionalInt(min, max);
  if (!v.ok()) {
    return v.status();
  }
  return **v;
}

absl::StatusOr<std::optional<int64_t>> Field::OptionalInt(int64_t min, int64_t max) const {
  if (!present()) {
    return std::optional<int64_t>();
  }
  int64_t v = 0;
  if (!node_.IsScalar() || !absl::SimpleAtoi(node_.Scalar(), &v)) {
    return Error(absl::StrCat("expected an integer, found \"",
                              node_.IsScalar() ? node_.Scalar() : TypeName(node_), "\""));
  }
  if (v < min || v > max) {
    return Error(absl::StrCat("expected an integer from ", min, " to ", max, ", found ", v));
  }
  return std::optional<int64_t>(v);
}

absl::StatusOr<std::optional<double>> Field::OptionalNumber(double min, double max) const {
  if (!present()) {
    return std::optional<double>();
  }
  double v = 0;
  if (!node_.IsScalar() || !absl::SimpleAtod(node_.Scalar(), &v) || !std::isfinite(v)) {
    return Error(absl::StrCat("expected a number, found \"",
                              node_.IsScalar() ? node_.Scalar() : TypeName(node_), "\""));
  }
  if (v < min || v > max) {
    return Error(
        absl::StrCat("expected a number from ", min, " to ", max, ", found ", node_.Scalar()));
  }
  return std::optional<double>(v);
}

}  // namespace tessera::adapters
