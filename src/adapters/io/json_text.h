// Untrusted JSON text, handled without recursing once per level of it: nlohmann's parser and
// destructor do not recurse, but copying a value and dump() do, so an array nested 100,000 deep
// (200 KB) overflowed the stack where a value was copied or quoted in an error.
//
// Example:
//   if (JsonDepth(body) > kMaxJsonDepth) return absl::InvalidArgumentError("nested too deep");
//   absl::StrCat("expected GPU indices 0-63, found ", QuoteJson(g));  // "found 64", "found an
//   array of 2 elements"
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace tessera::adapters {

// No Kubernetes object or Prometheus answer nests this deep (a Pod with managedFields: ~15).
inline constexpr size_t kMaxJsonDepth = 100;

// The deepest nesting of arrays and objects in `text`, brackets inside strings not counted; one
// pass, no allocation. Text that is not JSON gets a number too: the parser judges it after.
size_t JsonDepth(absl::string_view text);

// A value as an error message quotes it: scalars as written (a string past 64 bytes cut short at
// a character boundary), arrays and objects by kind and size, never walked.
std::string QuoteJson(const nlohmann::json& v);

// The string at `key` of an object; "" when `object` is not an object or the member is missing or
// not a string (json::value() would throw on a member of another type, and a body is whatever
// the other end sent).
std::string JsonString(const nlohmann::json& object, const char* key);

}  // namespace tessera::adapters
