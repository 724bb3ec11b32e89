// Random: the only source of randomness in Tessera. Seeded explicitly and passed by reference,
// so that the same seed gives the same plan, schedule or simulation everywhere.
//
// Example:
//   Random rng(42);
//   int64_t i = rng.UniformInt(0, 9);   // inclusive bounds
//   rng.Shuffle(items);
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace tessera {

// Not thread-safe: give each thread its own Random (e.g. seeded from a parent's NextSeed()).
class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}

  // Uniform integer in [lo, hi]; requires lo <= hi.
  int64_t UniformInt(int64_t lo, int64_t hi);
  // Uniform double in [0, 1).
  double UniformDouble();
  // Uniform double in [lo, hi).
  double UniformDouble(double lo, double hi) { return lo + (hi - lo) * UniformDouble(); }
  // True with probability p.
  bool Bernoulli(double p) { return UniformDouble() < p; }
  // A fresh seed for a child generator.
  uint64_t NextSeed() { return engine_(); }

  // Fisher-Yates shuffle; portable (does not depend on the standard library's algorithm).
  template <typename T>
  void Shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) {
      size_t j = static_cast<size_t>(UniformInt(0, static_cast<int64_t>(i) - 1));
      std::swap(items[i - 1], items[j]);
    }
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace tessera
