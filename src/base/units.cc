#include "base/units.h"

#include <cmath>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera {
namespace {

// A parsed non-negative decimal "mantissa" kept exact as digits / 10^scale, plus exponent.
struct Decimal {
  // The value is (integer_digits . fraction_digits) x 10^exponent.
  std::string digits;  // all digits, integer part then fraction part
  int fraction_len = 0;
  int exponent = 0;
};

// Splits `text` into a decimal number and the rest (suffix). Returns false if no number.
bool ParseDecimalPrefix(absl::string_view text, Decimal* out, absl::string_view* rest) {
  size_t i = 0;
  bool seen_digit = false;
  while (i < text.size() && absl::ascii_isdigit(text[i])) {
    out->digits.push_back(text[i]);
    seen_digit = true;
    ++i;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && absl::ascii_isdigit(text[i])) {
      out->digits.push_back(text[i]);
      ++out->fraction_len;
      seen_digit = true;
      ++i;
    }
  }
  if (!seen_digit) {
    return false;
  }
  // Exponent: 'e' or 'E' followed by an optional sign and digits. "E" alone is the exa suffix.
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    size_t j = i + 1;
    int sign = 1;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) {
      sign = text[j] == '-' ? -1 : 1;
      ++j;
    }
    size_t start = j;
    int exp = 0;
    while (j < text.size() && absl::ascii_isdigit(text[j]) && j - start < 4) {
      exp = exp * 10 + (text[j] - '0');
      ++j;
    }
    if (j > start && (j == text.size() || !absl::ascii_isdigit(text[j]))) {
      out->exponent = sign * exp;
      i = j;
    }
  }
  *rest = text.substr(i);
  return true;
}

// Returns ceil(decimal x multiplier) or an error when it exceeds `limit`.
absl::StatusOr<int64_t> ScaleUp(const Decimal& d, long double multiplier, int64_t limit) {
  // long double keeps 64 bits of mantissa: exact for every quantity we accept below 2^62
  // except for pathological fraction lengths, which we round up (a minimum stays a minimum).
  long double value = 0;
  for (char c : d.digits) {
    value = value * 10 + (c - '0');
  }
  value *= multiplier;
  int scale = d.exponent - d.fraction_len;
  value *= std::pow(10.0L, static_cast<long double>(scale));
  if (!std::isfinite(value) || value > static_cast<long double>(limit)) {
    return absl::OutOfRangeError("value too large");
  }
  // A value within 1e-6 of an integer is that integer (binary floating error); anything else
  // rounds up.
  long double rounded = std::round(value);
  if (std::fabs(value - rounded) >= 1e-6L) {
    rounded = std::ceil(value);
  }
  return static_cast<int64_t>(rounded);
}

}  // namespace

absl::StatusOr<int64_t> ParseBytes(absl::string_view raw) {
  absl::string_view text = absl::StripAsciiWhitespace(raw);
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid byte quantity \"", raw, "\": ", why,
        " (expected a non-negative number with an optional suffix Ki, Mi, Gi, Ti, Pi, Ei, k, M, "
        "G, T, P or E, such as 18Gi or 80G)"));
  };
  if (text.empty()) {
    return invalid("empty");
  }
  if (text[0] == '-') {
    return invalid("negative");
  }
  if (text[0] == '+') {
    text.remove_prefix(1);
  }
  Decimal d;
  absl::string_view suffix;
  if (!ParseDecimalPrefix(text, &d, &suffix)) {
    return invalid("no number");
  }
  long double multiplier = 0;
  if (suffix.empty()) {
    multiplier = 1;
  } else if (suffix == "Ki") {
    multiplier = static_cast<long double>(kKiB);
  } else if (suffix == "Mi") {
    multiplier = static_cast<long double>(kMiB);
  } else if (suffix == "Gi") {
    multiplier = static_cast<long double>(kGiB);
  } else if (suffix == "Ti") {
    multiplier = static_cast<long double>(kTiB);
  } else if (suffix == "Pi") {
    multiplier = static_cast<long double>(kTiB) * 1024;
  } else if (suffix == "Ei") {
    multiplier = static_cast<long double>(kTiB) * 1024 * 1024;
  } else if (suffix == "k") {
    multiplier = 1e3L;
  } else if (suffix == "M") {
    multiplier = 1e6L;
  } else if (suffix == "G") {
    multiplier = 1e9L;
  } else if (suffix == "T") {
    multiplier = 1e12L;
  } else if (suffix == "P") {
    multiplier = 1e15L;
  } else if (suffix == "E") {
    multiplier = 1e18L;
  } else {
    return invalid(absl::StrCat("unknown suffix \"", suffix, "\""));
  }
  absl::StatusOr<int64_t> value = ScaleUp(d, multiplier, int64_t{1} << 62);
  if (!value.ok()) {
    return absl::OutOfRangeError(
        absl::StrCat("byte quantity \"", raw, "\" is too large (limit 4Ei)"));
  }
  return *value;
}

std::string FormatBytes(int64_t bytes) {
  if (bytes == 0) {
    return "0";
  }
  struct Unit {
    int64_t size;
    const char* name;
  };
  static constexpr Unit kUnits[] = {{kTiB, "Ti"}, {kGiB, "Gi"}, {kMiB, "Mi"}, {kKiB, "Ki"}};
  for (const Unit& u : kUnits) {
    if (bytes % u.size == 0) {
      return absl::StrCat(bytes / u.size, u.name);
    }
  }
  if (bytes >= kGiB) {
    return absl::StrFormat("%.2fGiB", static_cast<double>(bytes) / kGiB);
  }
  return absl::StrCat(bytes);
}

std::string FormatGiB(int64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / kGiB);
}

absl::StatusOr<int64_t> ParseMilliGpu(absl::string_view raw) {
  absl::string_view text = absl::StripAsciiWhitespace(raw);
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid GPU share \"", raw, "\": ", why,
                     " (expected a non-negative number such as 0.25 or 2, or milli-GPU such "
                     "as 250m)"));
  };
  if (text.empty()) {
    return invalid("empty");
  }
  if (text[0] == '-') {
    return invalid("negative");
  }
  Decimal d;
  absl::string_view suffix;
  if (!ParseDecimalPrefix(text, &d, &suffix)) {
    return invalid("no number");
  }
  long double multiplier;
  if (suffix.empty()) {
    multiplier = kMilliPerGpu;
  } else if (suffix == "m") {
    multiplier = 1;
  } else {
    return invalid(absl::StrCat("unknown suffix \"", suffix, "\""));
  }
  absl::StatusOr<int64_t> value = ScaleUp(d, multiplier, int64_t{1} << 40);
  if (!value.ok()) {
    return invalid("too large");
  }
  return *value;
}

std::string FormatMilliGpu(int64_t milli) {
  if (milli % kMilliPerGpu == 0) {
    return absl::StrCat(milli / kMilliPerGpu);
  }
  std::string s = absl::StrFormat("%d.%03d", milli / kMilliPerGpu, milli % kMilliPerGpu);
  while (!s.empty() && s.back() == '0') {
    s.pop_back();
  }
  return s;
}

}  // namespace tessera
