#include "base/parallel.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(ParallelFor, RunsEachIndexOnceOnAsManyThreadsAsAsked) {
  for (size_t threads : {0, 1, 3, 64}) {
    std::vector<std::atomic<int>> runs(50);
    ParallelFor(runs.size(), threads, [&](size_t i) { ++runs[i]; });
    for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].load(), 1) << threads << " " << i;
  }
  int calls = 0;
  ParallelFor(0, 4, [&](size_t) { ++calls; });
  EXPECT_EQ(calls, 0);
  // With two threads, index 0 waits for index 1 to start: it can only finish if both run at once.
  std::atomic<bool> second_started{false};
  std::atomic<bool> overlapped{false};
  ParallelFor(2, 2, [&](size_t i) {
    if (i == 1) {
      second_started = true;
      return;
    }
    for (int k = 0; k < 5000 && !second_started.load(); ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    overlapped = second_started.load();
  });
  EXPECT_TRUE(overlapped.load());
}

}  // namespace
}  // namespace tessera
