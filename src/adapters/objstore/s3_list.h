// S3 ListObjectsV2 responses (GET /BUCKET?list-type=2&prefix=P): the objects, and the
// continuation token of a truncated page. Also S3's <Error> bodies. A small reader for exactly
// these documents: elements without attributes we need, the five XML entities and numeric
// character references.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::adapters::objstore {

struct S3Object {
  std::string key;
  int64_t size = 0;
  std::string etag;
};

struct S3ListPage {
  std::vector<S3Object> objects;
  bool truncated = false;
  std::string next_token;
};

absl::StatusOr<S3ListPage> ParseListObjectsV2(const std::string& xml);

// "Code: Message" from an S3 <Error> body (or STS's <ErrorResponse><Error>), or "" when the body
// is not one.
std::string S3ErrorSummary(const std::string& xml);

// The decoded text of the first <tag>...</tag> in `xml`; NotFound when there is none.
absl::StatusOr<std::string> XmlText(const std::string& xml, const std::string& tag);

}  // namespace tessera::adapters::objstore
