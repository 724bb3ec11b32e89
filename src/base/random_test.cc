#include "base/random.h"

#include <algorithm>
#include <numeric>

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(Random, SameSeedSameSequence) {
  Random a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    int64_t x = a.UniformInt(0, 1'000'000);
    EXPECT_EQ(x, b.UniformInt(0, 1'000'000));
    differs |= x != c.UniformInt(0, 1'000'000);
  }
  EXPECT_TRUE(differs);
}

TEST(Random, BoundsInclusiveAndCovered) {
  Random rng(7);
  std::vector<int> seen(6, 0);
  for (int i = 0; i < 6000; ++i) {
    int64_t x = rng.UniformInt(-2, 3);
    ASSERT_GE(x, -2);
    ASSERT_LE(x, 3);
    ++seen[x + 2];
  }
  for (int count : seen) {
    EXPECT_GT(count, 800);  // ~1000 expected each
    EXPECT_LT(count, 1200);
  }
  for (int i = 0; i < 1000; ++i) {
    double d = rng.UniformDouble();
    ASSERT_GE(d, 0.0);
    ASSERT_LT(d, 1.0);
  }
  EXPECT_EQ(rng.UniformInt(5, 5), 5);
}

TEST(Random, ShuffleIsAPermutationAndSeeded) {
  std::vector<int> v(50);
  std::iota(v.begin(), v.end(), 0);
  std::vector<int> a = v, b = v;
  Random r1(1), r2(1);
  r1.Shuffle(a);
  r2.Shuffle(b);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, v);
  std::sort(a.begin(), a.end());
  EXPECT_EQ(a, v);
}

}  // namespace
}  // namespace tessera
