#include "adapters/k8s/yaml_reader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

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

// libyaml's parser over a text, and the event it gave last: each event is freed when the next
// is read, and the parser and the last event when the reader goes, whichever way the caller
// leaves.
class YamlEvents {
 public:
  explicit YamlEvents(absl::string_view text) {
    initialised_ = yaml_parser_initialize(&parser_) != 0;
    if (initialised_) {
      yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()),
                                   text.size());
    }
  }
  ~YamlEvents() {
    Release();
    if (initialised_) yaml_parser_delete(&parser_);
  }
  YamlEvents(const YamlEvents&) = delete;
  YamlEvents& operator=(const YamlEvents&) = delete;

  // False when libyaml could not allocate its parser.
  bool ok() const { return initialised_; }
  // The next event, valid until the next call; nullptr when the text is malformed there
  // (parser() says where and why).
  const yaml_event_t* Next() {
    Release();
    if (!initialised_ || yaml_parser_parse(&parser_, &event_) == 0) return nullptr;
    holding_ = true;
    return &event_;
  }
  const yaml_parser_t& parser() const { return parser_; }

 private:
  void Release() {
    if (holding_) yaml_event_delete(&event_);
    holding_ = false;
  }
  yaml_parser_t parser_{};
  yaml_event_t event_{};
  bool initialised_ = false;
  bool holding_ = false;
};

// Collections nested deeper are refused (yaml-cpp gives up at 500 with "bad file").
constexpr size_t kMaxYamlDepth = 100;

// Parses the whole stream with libyaml (a strict, widely fuzzed YAML 1.1 parser) and reports
// its first error with its position. yaml-cpp 0.7 loops forever on some malformed input
// (",5 t\n," found by fuzzing), so yaml-cpp only sees text libyaml accepted.
absl::Status CheckSyntax(absl::string_view file, absl::string_view text) {
  YamlEvents events(text);
  if (!events.ok()) return absl::ResourceExhaustedError("cannot initialise the YAML parser");
  int flow_depth = 0;
  // The collections open, innermost last (events come in order: a stack answers for each
  // whether it is in flow style, and for a map whether a key comes next and the scalar keys seen
  // with their line). A key given twice is refused, as Kubernetes' strict decoding does:
  // yaml-cpp would keep the first and drop the second without a word.
  struct Open {
    bool flow = false;
    bool map = false;
    bool expect_key = true;
    std::map<std::string, size_t, std::less<>> seen;
  };
  std::vector<Open> open;
  ByteOffsets offsets(text);
  for (;;) {
    const yaml_event_t* got = events.Next();
    if (got == nullptr) {
      const yaml_parser_t& parser = events.parser();
      return absl::InvalidArgumentError(absl::StrCat(
          file, ":", parser.problem_mark.line + 1, ":", parser.problem_mark.column + 1,
          ": malformed YAML/JSON: ", parser.problem != nullptr ? parser.problem : "syntax error",
          parser.context != nullptr ? absl::StrCat(" ", parser.context) : std::string()));
    }
    const yaml_event_t& event = *got;
    const bool node = event.type == YAML_SCALAR_EVENT || event.type == YAML_ALIAS_EVENT ||
                      event.type == YAML_SEQUENCE_START_EVENT ||
                      event.type == YAML_MAPPING_START_EVENT;
    if (node && !open.empty() && open.back().map) {
      Open& top = open.back();
      if (top.expect_key && event.type == YAML_SCALAR_EVENT) {
        std::string key(reinterpret_cast<const char*>(event.data.scalar.value),
                        event.data.scalar.length);
        auto [at, fresh] = top.seen.emplace(key, event.start_mark.line + 1);
        if (!fresh && key != "<<") {
          return absl::InvalidArgumentError(
              absl::StrCat(file, ":", event.start_mark.line + 1, ":", event.start_mark.column + 1,
                           ": duplicate key \"", key, "\" (first at line ", at->second,
                           "); give each key once"));
        }
      }
      top.expect_key = !top.expect_key;
    }
    // A tag with a ',' in it (on any node) is another input yaml-cpp 0.7 never finishes.
    const yaml_char_t* tag = event.type == YAML_SCALAR_EVENT ? event.data.scalar.tag
                             : event.type == YAML_SEQUENCE_START_EVENT
                                 ? event.data.sequence_start.tag
                             : event.type == YAML_MAPPING_START_EVENT ? event.data.mapping_start.tag
                                                                      : nullptr;
    if (tag != nullptr && std::strchr(reinterpret_cast<const char*>(tag), ',') != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(file, ":", event.start_mark.line + 1, ":",
                                                     event.start_mark.column + 1,
                                                     ": unsupported YAML: a tag containing ','"));
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
        return absl::InvalidArgumentError(
            absl::StrCat(file, ":", event.start_mark.line + 1, ":", event.start_mark.column + 1,
                         ": unsupported YAML: anchor or alias ", name, " followed by '",
                         text.substr(next, 1), "'; put a space after the name"));
      }
    }
    if (event.type == YAML_SEQUENCE_START_EVENT || event.type == YAML_MAPPING_START_EVENT) {
      const bool map = event.type == YAML_MAPPING_START_EVENT;
      const bool flow = map ? event.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE
                            : event.data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE;
      open.push_back(Open{flow, map, true, {}});
      flow_depth += flow ? 1 : 0;
      // yaml-cpp refuses more than 500 levels as "bad file"; no configuration nests this deep.
      if (open.size() > kMaxYamlDepth) {
        return absl::InvalidArgumentError(
            absl::StrCat(file, ":", event.start_mark.line + 1, ":", event.start_mark.column + 1,
                         ": unsupported YAML: nested deeper than ", kMaxYamlDepth, " levels"));
      }
    } else if ((event.type == YAML_SEQUENCE_END_EVENT || event.type == YAML_MAPPING_END_EVENT) &&
               !open.empty()) {
      flow_depth -= open.back().flow ? 1 : 0;
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
        return absl::InvalidArgumentError(
            absl::StrCat(file, ":", event.start_mark.line + 1, ":", event.start_mark.column + 1,
                         ": unsupported YAML: a plain (unquoted) value that starts a line with ',' "
                         "or '?'; quote it"));
      }
    }
    if (event.type == YAML_STREAM_END_EVENT) return absl::OkStatus();
  }
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

// A CR not followed by LF is a line break in YAML, and libyaml reads it as one; yaml-cpp 0.7
// does not (it reads on, and "#o\rM\n\".\",(F" never finishes: found by fuzzing). Both parsers
// get it as LF, which keeps every byte offset, line and column: `original`, or a copy in
// `storage` with each lone CR an LF.
absl::string_view LoneCrAsLf(absl::string_view original, std::string* storage) {
  for (size_t i = original.find('\r'); i != absl::string_view::npos;
       i = original.find('\r', i + 1)) {
    if (i + 1 < original.size() && original[i + 1] == '\n') continue;
    if (storage->empty()) *storage = std::string(original);
    (*storage)[i] = '\n';
  }
  return storage->empty() ? original : absl::string_view(*storage);
}

}  // namespace

absl::StatusOr<std::vector<YAML::Node>> ParseYamlDocuments(absl::string_view file,
                                                           absl::string_view original) {
  std::string normalized;
  const absl::string_view text = LoneCrAsLf(original, &normalized);
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

namespace {

// One entry of the map SetListItemScalars edits, as its events placed it (byte offsets).
struct MapEntry {
  std::string key;
  size_t key_column = 0;  // characters from the start of its line
  size_t value_begin = 0, value_end = 0;
  bool scalar = false;    // a scalar value (not a list, a map or an alias)
  bool one_line = false;  // a plain or quoted scalar that begins and ends on the key's line
};

// Where the map item `index` of the list under `list_key` lies: its entries, whether it is a
// flow map, and the offset of its closing '}' (flow) or its end.
struct MapPlace {
  bool found_list = false;
  size_t list_items = 0;
  bool found = false;
  bool is_map = false;
  bool flow = false;
  size_t line = 0, column = 0;  // where the item begins (1-based), for errors
  size_t end = 0;
  std::vector<MapEntry> entries;
};

// Walks the events of `text` (already checked by CheckText and CheckSyntax) to the map.
absl::Status FindListItemMap(absl::string_view file, absl::string_view text,
                             absl::string_view list_key, size_t index, MapPlace* place) {
  YamlEvents events(text);
  if (!events.ok()) return absl::ResourceExhaustedError("cannot initialise the YAML parser");
  // One frame per open collection: a map alternates keys and values, a list counts items.
  struct Frame {
    bool map = false;
    bool expect_key = true;
    std::string key;
    size_t items = 0;
    bool target_list = false;
    bool target_item = false;
  };
  std::vector<Frame> stack;
  ByteOffsets offsets(text);
  bool done = false;
  while (!done) {
    const yaml_event_t* got = events.Next();
    if (got == nullptr) return absl::InvalidArgumentError(absl::StrCat(file, ": malformed YAML"));
    const yaml_event_t& event = *got;
    const yaml_event_type_t type = event.type;
    const bool node = type == YAML_SCALAR_EVENT || type == YAML_ALIAS_EVENT ||
                      type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT;
    if (type == YAML_DOCUMENT_END_EVENT || type == YAML_STREAM_END_EVENT) done = true;
    bool opens_list = false, opens_item = false;  // the collection this event opens
    if (node && !stack.empty()) {
      Frame& top = stack.back();
      const bool is_key = top.map && top.expect_key;
      const bool in_item = top.target_item;
      if (is_key) {
        top.key = type == YAML_SCALAR_EVENT
                      ? std::string(reinterpret_cast<const char*>(event.data.scalar.value),
                                    event.data.scalar.length)
                      : std::string();
        if (in_item) {
          MapEntry e;
          e.key = top.key;
          e.key_column = event.start_mark.column;
          place->entries.push_back(std::move(e));
        }
      } else if (in_item && !place->entries.empty()) {
        MapEntry& e = place->entries.back();
        e.value_begin = offsets.Of(event.start_mark.index);
        e.value_end = offsets.Of(event.end_mark.index);
        e.scalar = type == YAML_SCALAR_EVENT;
        const yaml_scalar_style_t style =
            e.scalar ? event.data.scalar.style : YAML_ANY_SCALAR_STYLE;
        e.one_line =
            e.scalar && event.start_mark.line == event.end_mark.line &&
            (style == YAML_PLAIN_SCALAR_STYLE || style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
             style == YAML_DOUBLE_QUOTED_SCALAR_STYLE);
      }
      if (top.map && !top.expect_key) {
        opens_list = stack.size() == 1 && top.key == list_key;
        if (opens_list) {
          place->found_list = type == YAML_SEQUENCE_START_EVENT;
          if (!place->found_list) done = true;
        }
      } else if (!top.map) {
        opens_item = top.target_list && top.items == index;
        if (top.target_list) place->list_items = ++top.items;
        if (opens_item) {
          place->found = true;
          place->is_map = type == YAML_MAPPING_START_EVENT;
          place->line = event.start_mark.line + 1;
          place->column = event.start_mark.column + 1;
          if (!place->is_map) done = true;
        }
      }
      if (top.map) top.expect_key = !top.expect_key;
    }
    if (type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT) {
      Frame f;
      f.map = type == YAML_MAPPING_START_EVENT;
      f.target_list = opens_list;
      f.target_item = opens_item;
      if (opens_item && f.map)
        place->flow = event.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE;
      stack.push_back(std::move(f));
    } else if (type == YAML_SEQUENCE_END_EVENT || type == YAML_MAPPING_END_EVENT) {
      if (!stack.empty()) {
        if (stack.back().target_item) {
          place->end = offsets.Of(event.start_mark.index);
          done = true;
        }
        if (stack.back().target_list) done = true;
        stack.pop_back();
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> SetListItemScalars(
    absl::string_view file, absl::string_view original, absl::string_view list_key, size_t index,
    const std::vector<std::pair<std::string, std::string>>& values) {
  std::string normalized;
  const absl::string_view text = LoneCrAsLf(original, &normalized);
  if (absl::Status s = CheckText(file, text); !s.ok()) return s;
  if (absl::Status s = CheckSyntax(file, text); !s.ok()) return s;
  MapPlace place;
  if (absl::Status s = FindListItemMap(file, text, list_key, index, &place); !s.ok()) return s;
  if (!place.found_list) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": no list under the top-level key \"", list_key, "\""));
  }
  if (!place.found) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": ", list_key, " has ", place.list_items, " items, not item ", index));
  }
  const std::string where =
      absl::StrCat(file, ":", place.line, ":", place.column, ": ", list_key, "[", index, "]");
  if (!place.is_map) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": expected a map"));
  }
  struct Edit {
    size_t begin, end;
    std::string with;
  };
  std::vector<Edit> edits;
  std::vector<const std::pair<std::string, std::string>*> added;
  for (const auto& kv : values) {
    const MapEntry* entry = nullptr;
    for (const MapEntry& e : place.entries) {
      if (e.key == kv.first) entry = &e;  // one at most: CheckSyntax refuses a key given twice
    }
    if (entry == nullptr) {
      added.push_back(&kv);
    } else if (!entry->scalar) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".", kv.first, ": its value is a list, a map or an alias; set it by hand"));
    } else {
      edits.push_back({entry->value_begin, entry->value_end, kv.second});
    }
  }
  if (!added.empty() && place.flow) {
    // Before the '}': after a ", " unless the map is empty or ends with a comma already.
    size_t at = place.end;
    size_t last = at;
    while (last > 0 && absl::ascii_isspace(static_cast<unsigned char>(text[last - 1]))) --last;
    bool comma = !place.entries.empty() && last > 0 && text[last - 1] != ',';
    std::string with = !comma && at > 0 && text[at - 1] == ',' ? " " : "";
    for (const auto* kv : added) {
      absl::StrAppend(&with, comma ? ", " : "", kv->first, ": ", kv->second);
      comma = true;
    }
    edits.push_back({at, at, std::move(with)});
  } else if (!added.empty()) {
    const MapEntry* after = nullptr;  // the last entry on one line: the others' neighbour
    for (const MapEntry& e : place.entries) {
      if (e.one_line) after = &e;
    }
    if (after == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": no entry with a one-line value to add ", added.front()->first,
                       " after; set it by hand"));
    }
    // The line after the entry's, in the text's own line ending.
    size_t eol = text.find('\n', after->value_end);
    std::string line_end = "\n";
    size_t at = text.size();
    std::string with;
    if (eol == absl::string_view::npos) {
      with = "\n";  // the entry's line is the last and has no line ending
    } else {
      at = eol + 1;
      if (original[eol] == '\r') {
        line_end = "\r";
      } else if (eol > 0 && original[eol - 1] == '\r') {
        line_end = "\r\n";
      }
    }
    for (const auto* kv : added) {
      absl::StrAppend(&with, std::string(after->key_column, ' '), kv->first, ": ", kv->second,
                      line_end);
    }
    if (eol == absl::string_view::npos) with.resize(with.size() - line_end.size());
    edits.push_back({at, at, std::move(with)});
  }
  std::sort(edits.begin(), edits.end(),
            [](const Edit& a, const Edit& b) { return a.begin > b.begin; });
  std::string out(original);
  for (const Edit& e : edits) out.replace(e.begin, e.end - e.begin, e.with);
  if (absl::StatusOr<std::vector<YAML::Node>> docs = ParseYamlDocuments(file, out); !docs.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the edited text is not YAML (", docs.status().message(), ")"));
  }
  return out;
}

std::string CanonicalYaml(const YAML::Node& node, absl::string_view drop_key) {
  try {
    if (drop_key.empty() || !node.IsMap()) return YAML::Dump(node);
    YAML::Node copy = YAML::Clone(node);
    copy.remove(std::string(drop_key));
    return YAML::Dump(copy);
  } catch (const YAML::Exception& e) {
    // Not seen for a node yaml-cpp loaded; a text that cannot be written compares by its error.
    return absl::StrCat("(unwritable: ", e.what(), ")");
  }
}

int Field::line() const {
  try {
    return node_.Mark().is_null() ? 0 : node_.Mark().line + 1;
  } catch (const YAML::Exception&) {
    return 0;
  }
}

std::string Field::Location() const {
  YAML::Mark mark = YAML::Mark::null_mark();
  try {
    if (node_.IsDefined()) {
      mark = node_.Mark();
    } else if (parent_mark_node_.IsDefined()) {
      mark = parent_mark_node_.Mark();
    }
  } catch (const YAML::Exception&) {
  }
  return absl::StrCat(Where(file_, mark), ": ", path_.empty() ? "document" : path_);
}

absl::Status Field::Error(absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(Location(), ": ", message));
}

Field Field::Get(absl::string_view key) const {
  std::string path = path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
  if (!node_.IsMap()) {
    Field missing(file_, YAML::Node(YAML::NodeType::Undefined), path);
    // Under a missing map: the nearest enclosing map that is there.
    if (!node_.IsDefined()) missing.parent_mark_node_ = parent_mark_node_;
    return missing;
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
