// Units shared by every layer: byte quantities in Kubernetes' notation and GPU shares in
// milli-GPU (1000 = one whole GPU), plus their formatting.
//
// Example:
//   absl::StatusOr<int64_t> bytes = ParseBytes("18Gi");      // 19327352832
//   absl::StatusOr<int64_t> milli = ParseMilliGpu("0.25");   // 250
//   FormatBytes(*bytes);                                     // "18Gi"
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {

inline constexpr int64_t kKiB = int64_t{1} << 10;
inline constexpr int64_t kMiB = int64_t{1} << 20;
inline constexpr int64_t kGiB = int64_t{1} << 30;
inline constexpr int64_t kTiB = int64_t{1} << 40;

// One whole GPU in milli-GPU.
inline constexpr int64_t kMilliPerGpu = 1000;

// Parses a Kubernetes resource quantity of bytes: a non-negative decimal number (digits with an
// optional fraction, or an exponent such as "1e9") followed by an optional suffix: binary
// Ki Mi Gi Ti Pi Ei or decimal k M G T P E. "18Gi", "1.5Gi", "80G", "512", "1e9" are accepted;
// "18Gx", "-1Gi", "", "Gi", "1.2.3" are InvalidArgument with a message that says what was
// expected. Fractional bytes are rounded up. Values above 2^62 are OutOfRange.
absl::StatusOr<int64_t> ParseBytes(absl::string_view text);

// Formats bytes compactly and exactly when possible ("18Gi", "512Mi", "1.5Gi" as "1536Mi"),
// otherwise as GiB with two decimals ("17.63GiB").
std::string FormatBytes(int64_t bytes);

// Formats bytes as GiB with one decimal, for reports ("18.0 GiB").
std::string FormatGiB(int64_t bytes);

// Parses a GPU share into milli-GPU: a decimal ("0.2" -> 200, "2" -> 2000, "1.5" -> 1500) or a
// milli quantity ("250m" -> 250). Finer precision than 1 milli is rounded up (a share is a
// minimum). Negative, empty or malformed text is InvalidArgument.
absl::StatusOr<int64_t> ParseMilliGpu(absl::string_view text);

// Formats milli-GPU as a decimal GPU count ("0.25", "2", "0.333").
std::string FormatMilliGpu(int64_t milli);

}  // namespace tessera
