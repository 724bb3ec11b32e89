#include "base/random.h"

namespace tessera {

int64_t Random::UniformInt(int64_t lo, int64_t hi) {
  // Rejection sampling over the engine's 64-bit output: portable and unbiased, unlike
  // std::uniform_int_distribution whose algorithm differs between standard libraries.
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (span == UINT64_MAX) {
    return static_cast<int64_t>(engine_());
  }
  const uint64_t range = span + 1;
  const uint64_t limit = UINT64_MAX - (UINT64_MAX % range);
  uint64_t x;
  do {
    x = engine_();
  } while (x >= limit);
  return lo + static_cast<int64_t>(x % range);
}

double Random::UniformDouble() {
  // 53 random bits -> [0, 1).
  return static_cast<double>(engine_() >> 11) * 0x1.0p-53;
}

}  // namespace tessera
