// The requests one simulated replica runs at once, sharing it equally (processor sharing, the
// fluid model of continuous batching): each step of `step` seconds serves each of the n requests
// step / n seconds of its work.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

namespace tessera::sim {

// Each request is kept as the service `served_` will have reached when it is done, in a min-heap:
// a step costs O(1) and a completion O(log n), where taking each request's share from its own
// remaining work cost O(n) a step. A request is done once what is left of it is at most kDoneS,
// a margin wide beside what either reckoning's rounding adds up to (`served_` is counted from
// zero again every second, so its sums stay short): a request whose work ends on a step's end is
// then done at that step by both. At 1e-12 s they parted on such a request; the ProcessorSharing
// tests hold the two to the same steps for a simulated day and a week.
class ProcessorSharingBatch {
 public:
  // At most this much work left: done (1 ns; a step is 50 ms).
  static constexpr double kDoneS = 1e-9;

  size_t size() const { return done_at_.size(); }
  bool empty() const { return done_at_.empty(); }
  void Add(double work) {
    done_at_.push_back(served_ + work);
    std::push_heap(done_at_.begin(), done_at_.end(), std::greater<>());
  }
  // Serves each request `share` seconds of its work; returns how many are done.
  int Serve(double share) {
    served_ += share;
    int done = 0;
    while (!done_at_.empty() && done_at_.front() - served_ <= kDoneS) {
      std::pop_heap(done_at_.begin(), done_at_.end(), std::greater<>());
      done_at_.pop_back();
      ++done;
    }
    // Counted from zero again, so that `served_` stays small and its sum of shares rounds as
    // little (a replica may serve without a pause for weeks).
    if (done_at_.empty()) {
      served_ = 0;
    } else if (served_ > kRebaseS) {
      for (double& d : done_at_) d -= served_;
      served_ = 0;
    }
    return done;
  }

 private:
  static constexpr double kRebaseS = 1;
  double served_ = 0;
  std::vector<double> done_at_;
};

}  // namespace tessera::sim
