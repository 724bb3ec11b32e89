#include "base/clock.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(SimulatedClock, MovesOnlyWhenTold) {
  SimulatedClock clock(absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
  clock.Advance(absl::Seconds(-50));  // ignored: time never goes back
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
  EXPECT_FALSE(clock.SetTime(absl::FromUnixSeconds(10)));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
  EXPECT_TRUE(clock.SetTime(absl::FromUnixSeconds(200)));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(200));
}

TEST(SimulatedClock, UsableThroughInterface) {
  SimulatedClock sim(absl::UnixEpoch());
  const Clock& clock = sim;
  sim.Advance(absl::Minutes(1));
  EXPECT_EQ(clock.Now() - absl::UnixEpoch(), absl::Minutes(1));
}

TEST(RealClock, Monotone) {
  RealClock clock;
  absl::Time prev = clock.Now();
  for (int i = 0; i < 1000; ++i) {
    absl::Time t = clock.Now();
    ASSERT_GE(t, prev);
    prev = t;
  }
  // The real clock is after 2020: it is reading the wall clock, not a constant.
  EXPECT_GT(prev, absl::FromUnixSeconds(1577836800));
}

}  // namespace
}  // namespace tessera
