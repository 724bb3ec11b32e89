// Checks on fetched model files: untrusted names from listings and manifests, SHA-256, and the
// structure of safetensors files (shared/reference/weight-streaming.md section 3).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::adapters::objstore {

// A relative path from a listing or manifest: non-empty, no NUL, no backslash, not absolute,
// no "." / ".." / empty segment, at most 1024 bytes. InvalidArgument naming the problem (the
// name is quoted with control bytes escaped).
absl::Status ValidateRelativeName(absl::string_view name);

// Lowercase hex SHA-256 of a file (streamed).
absl::StatusOr<std::string> Sha256File(const std::string& path);
std::string Sha256Hex(absl::string_view data);
// Whether `text` is a SHA-256 written in hex: 64 hex digits, either case.
bool IsSha256Hex(absl::string_view text);

// A safetensors file: header size N <= 100,000,000 and 8 + N <= file size; the header a JSON
// object; every tensor's dtype known, data_offsets [BEGIN, END) inside the buffer with
// END - BEGIN = numel x dtype size; offsets sorted, contiguous from 0, no overlap, and the last
// END the buffer's end. Errors name the file and the tensor.
absl::Status VerifySafetensors(const std::string& path);

}  // namespace tessera::adapters::objstore
