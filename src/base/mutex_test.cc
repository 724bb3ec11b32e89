#include "base/mutex.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tessera {
namespace {

// What each build's Mutex must do: exclude. Four threads add to a plain counter; a lock that let
// two in at once would lose increments (and, in the TSan build, be reported as a race).
TEST(Mutex, MutexLockExcludesOtherThreads) {
  struct Counter {
    Mutex mu;
    int64_t value ABSL_GUARDED_BY(mu) = 0;
  } counter;
  constexpr int kThreads = 4;
  constexpr int kAdds = 20000;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&counter] {
      for (int i = 0; i < kAdds; ++i) {
        MutexLock lock(&counter.mu);
        // A read, a yield, then a write: with a lock that let two threads in at once, the
        // others' adds made during the yield would be lost (a no-op lock keeps about a quarter).
        const int64_t v = counter.value;
        std::this_thread::yield();
        counter.value = v + 1;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  MutexLock lock(&counter.mu);
  EXPECT_EQ(counter.value, int64_t{kThreads} * kAdds);
}

}  // namespace
}  // namespace tessera
