#include "base/clock.h"

#include <cstdint>
#include <thread>

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

// Spins until the calling thread has used `seconds` of CPU by ThreadCpuSeconds (or 10^9 steps).
double SpinThreadCpu(double seconds) {
  const double start = ThreadCpuSeconds();
  volatile double sink = 0;
  for (int64_t i = 0; i < 1000000000 && ThreadCpuSeconds() - start < seconds; ++i) sink = sink + 1;
  return ThreadCpuSeconds() - start;
}

TEST(ThreadCpuSeconds, CountsThisThreadsWorkNotAnothers) {
  EXPECT_GE(SpinThreadCpu(0.02), 0.02);
  // Another thread's work is not this one's: while it spins, this one waits on the join.
  const double before = ThreadCpuSeconds();
  double other = 0;
  std::thread t([&] { other = SpinThreadCpu(0.05); });
  t.join();
  EXPECT_GE(other, 0.05);
  EXPECT_LT(ThreadCpuSeconds() - before, 0.04);
}

}  // namespace
}  // namespace tessera
