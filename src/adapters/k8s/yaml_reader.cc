#include "adapters/k8s/yaml_reader.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "yaml.h"  // libyaml

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

// The length of the valid UTF-8 sequence at `p` (1-4), or 0 if it is not valid (overlong
// forms, surrogates and code points above U+10FFFF are invalid).
int Utf8Length(const unsigned char* p, size_t left) {
  unsigned char c = p[0];
  if (c < 0x80) {
    return 1;
  }
  int len;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (left < static_cast<size_t>(len)) {
    return 0;
  }
  for (int i = 1; i < len; ++i) {
    if ((p[i] & 0xC0) != 0x80) {
      return 0;
    }
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return len;
}

// libyaml's marks count characters (a CR LF as two), not bytes; this turns them into byte
// offsets by walking the UTF-8 text forward (events come in text order, so one parse walks it
// once). A byte order mark, which libyaml skips without counting, is stepped over first.
class ByteOffsets {
 public:
  explicit ByteOffsets(absl::string_view text) : text_(text) {
    if (absl::StartsWith(text, "\xEF\xBB\xBF")) base_ = bytes_ = 3;
  }
  size_t Of(size_t chars) {
    if (chars < chars_) {
      chars_ = 0;
      bytes_ = base_;
    }
    const auto* p = reinterpret_cast<const unsigned char*>(text_.data());
    while (chars_ < chars && bytes_ < text_.size()) {
      // The text passed CheckText, so every character is whole; 1 guards the walk regardless.
      bytes_ += static_cast<size_t>(std::max(1, Utf8Length(p + bytes_, text_.size() - bytes_)));
      ++chars_;
    }
    return std::min(bytes_, text_.size());
  }

 private:
  absl::string_view text_;
  size_t base_ = 0;
  size_t chars_ = 0;
  size_t bytes_ = 0;
};

// Collections nested deeper are refused (yaml-cpp gives up at 500 with "bad file").
constexpr size_t kMaxYamlDepth = 100;

// Parses the whole stream with libyaml (a strict, widely fuzzed YAML 1.1 parser) and reports
// its first error with its position. yaml-cpp 0.7 loops forever on some malformed input
// (",5 t\n," found by fuzzing), so yaml-cpp only sees text libyaml accepted.
absl::Status CheckSyntax(absl::string_view file, absl::string_view text) {
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) {
    return absl::ResourceExhaustedError("cannot initialise the YAML parser");
  }
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()),
                               text.size());
  absl::Status status;
  int flow_depth = 0;
  std::vector<bool> open;
  ByteOffsets offsets(text);
  for (;;) {
    yaml_event_t event;
    if (!yaml_parser_parse(&parser, &event)) {
      status = absl::InvalidArgumentError(absl::StrCat(
          file, ":", parser.problem_mark.line + 1, ":", parser.problem_mark.column + 1,
          ": malformed YAML/JSON: ", parser.problem != nullptr ? parser.problem : "syntax error",
          parser.context != nullptr ? absl::StrCat(" ", parser.context) : std::string()));
      break;
    }
    // A tag with a ',' in it (on any node) is another input yaml-cpp 0.7 never finishes.
    const yaml_char_t* tag = event.type == YAML_SCALAR_EVENT ? event.data.scalar.tag
                             : event.type == YAML_SEQUENCE_START_EVENT
                                 ? event.data.sequence_start.tag
                             : event.type == YAML_MAPPING_START_EVENT ? event.data.mapping_start.tag
                                                                      : nullptr;
    if (tag != nullptr && std::strchr(reinterpret_cast<const char*>(tag), ',') != nullptr) {
      status = absl::InvalidArgumentError(absl::StrCat(file, ":", event.start_mark.line + 1, ":",
                                                       event.start_mark.column + 1,
                                                       ": unsupported YAML: a tag containing ','"));
      yaml_event_delete(&event);
      break;
    }
    // An anchor or alias name that runs into the next character ("&k: v"): libyaml ends the name
    // there (its names are letters, digits, '-' and '_'), yaml-cpp 0.7 reads on, and with a
    // "? key" after it never finishes ("&k: W\n? a", found by fuzzing).
    const yaml_char_t* anchor =
        event.type == YAML_SCALAR_EVENT           ? event.data.scalar.anchor
        : event.type == YAML_SEQUENCE_START_EVENT ? event.data.sequence_start.anchor
        : event.type == YAML_MAPPING_START_EVENT  ? event.data.mapping_start.anchor
        : event.type == YAML_ALIAS_EVENT          ? event.data.alias.anchor
                                                  : nullptr;
    if (anchor != nullptr) {
      const std::string name = absl::StrCat(event.type == YAML_ALIAS_EVENT ? "*" : "&",
                                            reinterpret_cast<const char*>(anchor));
      const size_t at = text.find(name, offsets.Of(event.start_mark.index));
      const size_t next = at == absl::string_view::npos ? at : at + name.size();
      if (next < text.size() && !absl::ascii_isspace(static_cast<unsigned char>(text[next])) &&
          !(flow_depth > 0 && (text[next] == ',' || text[next] == ']' || text[next] == '}'))) {
        // (libyaml lets only ASCII end a name: one byte is the whole character.)
        status = absl::InvalidArgumentError(
            absl::StrCat(file, ":", event.start_mark.line + 1, ":", event.start_mark.column + 1,
                         ": unsupported YAML: anchor or alias ", name, " followed by '",
                         text.substr(next, 1), "'; put a space after the name"));
        yaml_event_delete(&event);
        break;
      }
    }
    // Collections open and close in order: a stack of "is flow" answers them.
    if (event.type == YAML_SEQUENCE_START_EVENT || event.type == YAML_MAPPING_START_EVENT) {
      bool flow = event.type == YAML_SEQUENCE_START_EVENT
                      ? event.data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE
                      : event.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE;
      open.push_back(flow);
      flow_depth += flow ? 1 : 0;
      // yaml-cpp refuses more than 500 levels as "bad file"; no configuration nests this deep.
      if (open.size() > kMaxYamlDepth) {
        status = absl::InvalidArgumentError(
            absl::StrCat(file, ":", event.start_mark.line + 1, ":", event.start_mark.column + 1,
                         ": unsupported YAML: nested deeper than ", kMaxYamlDepth, " levels"));
        yaml_event_delete(&event);
        break;
      }
    } else if ((event.type == YAML_SEQUENCE_END_EVENT || event.type == YAML_MAPPING_END_EVENT) &&
               !open.empty()) {
      flow_depth -= open.back() ? 1 : 0;
      open.pop_back();
    }
    // yaml-cpp 0.7 also loops forever on a block-context plain scalar that starts with ',' or
    // has a continuation line starting with ',' (",5 t\n," and "!x t\n,M", found by fuzzing),
    // which libyaml accepts. No Kubernetes or Tessera file needs one: refuse it.
    if (event.type == YAML_SCALAR_EVENT && flow_depth == 0 &&
        event.data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
      const size_t start = offsets.Of(event.start_mark.index);
      absl::string_view raw = text.substr(start, offsets.Of(event.end_mark.index) - start);
      // Also a tagged or anchored plain value holding a ',' anywhere ("!,", "!a,b",
      // "!/ t\n!,": more of the same loop).
      bool has_property = event.data.scalar.tag != nullptr || event.data.scalar.anchor != nullptr;
      bool bad = (!raw.empty() && raw.front() == ',') ||
                 (has_property && raw.find(',') != absl::string_view::npos);
      for (size_t i = raw.find('\n'); !bad && i != absl::string_view::npos;
           i = raw.find('\n', i + 1)) {
        size_t j = raw.find_first_not_of(" \t\r\n", i);
        // A continuation line starting with '?' ("! 4 \n?  ", also fuzz-found) loops too.
        bad = j != absl::string_view::npos && (raw[j] == ',' || raw[j] == '?');
      }
      if (bad) {
        status = absl::InvalidArgumentError(
            absl::StrCat(file, ":", event.start_mark.line + 1, ":", event.start_mark.column + 1,
                         ": unsupported YAML: a plain (unquoted) value that starts a line with ',' "
                         "or '?'; quote it"));
        yaml_event_delete(&event);
        break;
      }
    }
    bool end = event.type == YAML_STREAM_END_EVENT;
    yaml_event_delete(&event);
    if (end) {
      break;
    }
  }
  yaml_parser_delete(&parser);
  return status;
}

absl::Status CheckText(absl::string_view file, absl::string_view text) {
  int line = 1, column = 1;
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < text.size();) {
    unsigned char c = bytes[i];
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ":", line, ":", column, ": malformed YAML/JSON: control character 0x",
                       absl::Hex(c, absl::kZeroPad2), " (expected text)"));
    }
    int len = Utf8Length(bytes + i, text.size() - i);
    if (len == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ":", line, ":", column, ": malformed YAML/JSON: invalid UTF-8 byte 0x",
                       absl::Hex(c, absl::kZeroPad2), " (expected UTF-8 text)"));
    }
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    i += static_cast<size_t>(len);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<YAML::Node>> ParseYamlDocuments(absl::string_view file,
                                                           absl::string_view original) {
  // A CR not followed by LF is a line break in YAML, and libyaml reads it as one; yaml-cpp 0.7
  // does not (it reads on, and "#o\rM\n\".\",(F" never finishes: found by fuzzing). Both
  // parsers get it as LF, which keeps every byte offset, line and column.
  std::string normalized;
  absl::string_view text = original;
  for (size_t i = text.find('\r'); i != absl::string_view::npos; i = text.find('\r', i + 1)) {
    if (i + 1 < text.size() && text[i + 1] == '\n') continue;
    if (normalized.empty()) normalized = std::string(original);
    normalized[i] = '\n';
  }
  if (!normalized.empty()) text = normalized;
  // YAML text is UTF-8 without control characters other than tab, LF and CR. yaml-cpp 0.7
  // loops forever on some inputs that break these rules (a NUL byte, invalid UTF-8; both found
  // by fuzzing), so such input is refused before it sees it.
  if (absl::Status s = CheckText(file, text); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckSyntax(file, text); !s.ok()) {
    return s;
  }
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
