// Status helpers shared by every layer: the two macros that make absl::Status propagation
// readable, and a helper to prefix context onto an error without losing its code.
//
// Example:
//   absl::StatusOr<Fleet> LoadFleet(absl::string_view path) {
//     TESSERA_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
//     TESSERA_RETURN_IF_ERROR(Validate(text));
//     ...
//   }
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#define TESSERA_STATUS_CONCAT_INNER(a, b) a##b
#define TESSERA_STATUS_CONCAT(a, b) TESSERA_STATUS_CONCAT_INNER(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function if not OK.
#define TESSERA_RETURN_IF_ERROR(expr)                        \
  do {                                                       \
    ::absl::Status tessera_status_tmp = (expr);              \
    if (!tessera_status_tmp.ok()) return tessera_status_tmp; \
  } while (false)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status, else moves the value
// into `lhs` (which may be a declaration).
#define TESSERA_ASSIGN_OR_RETURN(lhs, rexpr) \
  TESSERA_ASSIGN_OR_RETURN_IMPL(TESSERA_STATUS_CONCAT(tessera_statusor_, __LINE__), lhs, rexpr)

#define TESSERA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()

namespace tessera {

// Returns `status` with `context` prefixed to its message ("context: message"), same code.
// OK stays OK.
inline absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) {
    return status;
  }
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

}  // namespace tessera
