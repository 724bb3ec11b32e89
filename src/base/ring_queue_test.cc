#include "base/ring_queue.h"

#include <deque>
#include <string>

#include "base/random.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

// Random pushes and pops, the queue growing and wrapping around its ring many times over: it
// holds what a std::deque given the same operations holds, in the same order.
TEST(RingQueue, HoldsWhatADequeHoldsThroughGrowthAndWrapping) {
  Random rng(11);
  RingQueue<std::pair<double, std::string>> ring;
  std::deque<std::pair<double, std::string>> deque;
  for (int op = 0; op < 200'000; ++op) {
    // Phases that fill, then drain, so that the ring grows, wraps and empties.
    const bool filling = (op / 5'000) % 2 == 0;
    if (deque.empty() || rng.Bernoulli(filling ? 0.7 : 0.3)) {
      const double v = static_cast<double>(op);
      ring.emplace_back(v, std::to_string(op));
      deque.emplace_back(v, std::to_string(op));
    } else {
      ASSERT_EQ(ring.front(), deque.front()) << op;
      ring.pop_front();
      deque.pop_front();
    }
    ASSERT_EQ(ring.size(), deque.size()) << op;
    ASSERT_EQ(ring.empty(), deque.empty()) << op;
    if (op % 997 == 0) {
      for (size_t i = 0; i < deque.size(); ++i) ASSERT_EQ(ring[i], deque[i]) << op << " " << i;
    }
  }
  // The front can be changed in place.
  RingQueue<int> small;
  small.push_back(1);
  small.push_back(5);
  small.front() += 1;
  EXPECT_EQ(small.front(), 2);
  EXPECT_EQ(small[1], 5);
}

}  // namespace
}  // namespace tessera
