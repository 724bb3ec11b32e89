#include "sim/processor_sharing.h"

#include <vector>

#include "base/random.h"
#include "gtest/gtest.h"

namespace tessera::sim {
namespace {

// The reckoning the batch replaces: each request's remaining work, less its share every step.
// (Before 2026-12-07 the simulator's own, with 1e-12 s for done.)
class SubtractEachShare {
 public:
  size_t size() const { return remaining_.size(); }
  void Add(double work) { remaining_.push_back(work); }
  int Serve(double share) {
    int done = 0;
    for (size_t i = 0; i < remaining_.size();) {
      remaining_[i] -= share;
      if (remaining_[i] <= ProcessorSharingBatch::kDoneS) {
        remaining_[i] = remaining_.back();
        remaining_.pop_back();
        ++done;
      } else {
        ++i;
      }
    }
    return done;
  }

 private:
  std::vector<double> remaining_;
};

// A replica serving for a simulated day at the simulator's 50 ms steps, its batch full (64) in
// busy hours and often empty in quiet ones, with requests of 1 ms to 30 s of work (whole steps
// among them, which end exactly on a step's end): each step completes as many requests as the
// O(n) reckoning does, through the rebasing of the served count every second.
TEST(ProcessorSharing, CompletesWhatSubtractingEachShareCompletes) {
  Random rng(5);
  ProcessorSharingBatch batch;
  SubtractEachShare reference;
  const double step = 0.05;
  int64_t completed = 0, emptied = 0;
  for (int k = 0; k < 24 * 3600 * 20; ++k) {
    const bool busy_hour = (k / (3600 * 20)) % 2 == 0;
    const int arrivals = batch.size() >= 64 ? 0
                         : busy_hour        ? static_cast<int>(rng.UniformInt(0, 2))
                                            : (rng.Bernoulli(0.005) ? 1 : 0);
    for (int a = 0; a < arrivals; ++a) {
      const double work = rng.Bernoulli(0.2)
                              ? step * static_cast<double>(rng.UniformInt(1, 40))
                              : 0.001 + 30 * rng.UniformDouble() * rng.UniformDouble();
      batch.Add(work);
      reference.Add(work);
    }
    if (batch.empty()) continue;
    const double share = step / static_cast<double>(batch.size());
    const int done = batch.Serve(share);
    ASSERT_EQ(done, reference.Serve(share)) << "step " << k;
    ASSERT_EQ(batch.size(), reference.size()) << "step " << k;
    completed += done;
    emptied += batch.empty() ? 1 : 0;
  }
  EXPECT_GT(completed, 10'000);
  EXPECT_GT(emptied, 1'000);
}

// A replica that never empties for a simulated week (a long request always among a few short
// ones): what it has served would reach hours, and sums of millions of 50 ms shares round well
// past a nanosecond, were it not counted from zero again every second.
TEST(ProcessorSharing, AReplicaThatNeverEmptiesCompletesOnTheSameStepsForAWeek) {
  Random rng(9);
  ProcessorSharingBatch batch;
  SubtractEachShare reference;
  const double step = 0.05;
  int64_t completed = 0;
  for (int k = 0; k < 7 * 24 * 3600 * 20; ++k) {
    if (batch.size() < 4) {
      const double work = rng.Bernoulli(0.5) ? step * static_cast<double>(rng.UniformInt(1, 200))
                                             : 20 * rng.UniformDouble();
      batch.Add(work);
      reference.Add(work);
    }
    const double share = step / static_cast<double>(batch.size());
    const int done = batch.Serve(share);
    ASSERT_EQ(done, reference.Serve(share)) << "step " << k;
    completed += done;
  }
  EXPECT_GT(completed, 50'000);
}

TEST(ProcessorSharing, SharesTheReplicaEquallyAndEmptiesAtTheLastCompletion) {
  ProcessorSharingBatch batch;
  EXPECT_TRUE(batch.empty());
  batch.Add(1.0);
  batch.Add(2.0);
  // Two requests at half the replica each: the first done after 2 s, the second 1 s later.
  int done = 0, steps = 0;
  while (done == 0) {
    done = batch.Serve(0.05 / 2);
    ++steps;
  }
  EXPECT_EQ(steps, 40);
  EXPECT_EQ(done, 1);
  steps = 0;
  while (!batch.empty()) {
    batch.Serve(0.05);
    ++steps;
  }
  EXPECT_EQ(steps, 20);
  // Nothing of the past carries into the next request.
  batch.Add(0.1);
  EXPECT_EQ(batch.Serve(0.05), 0);
  EXPECT_EQ(batch.Serve(0.05), 1);
  // A request with no work is done at the first step.
  batch.Add(0);
  EXPECT_EQ(batch.Serve(0.05), 1);
}

}  // namespace
}  // namespace tessera::sim
