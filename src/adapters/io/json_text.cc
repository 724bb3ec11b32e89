#include "adapters/io/json_text.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera::adapters {

size_t JsonDepth(absl::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::string QuoteJson(const nlohmann::json& v) {
  constexpr size_t kMaxQuoted = 64;
  if (v.is_array() || v.is_object()) {
    const size_t n = v.size();
    return absl::StrCat(
        v.is_array() ? "an array of " : "an object of ", n,
        v.is_array() ? (n == 1 ? " element" : " elements") : (n == 1 ? " member" : " members"));
  }
  // error_handler::replace: invalid UTF-8 in a string is quoted as U+FFFD instead of throwing.
  std::string text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kMaxQuoted) {
    size_t cut = kMaxQuoted - 4;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // UTF-8
    text = absl::StrCat(text.substr(0, cut), v.is_string() ? "...\"" : "...");
  }
  return text;
}

std::string JsonString(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace tessera::adapters
