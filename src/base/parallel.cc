#include "base/parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace tessera {

void ParallelFor(size_t n, size_t threads, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) fn(i);
  };
  std::vector<std::thread> helpers;
  const size_t count = std::min(n, std::max<size_t>(threads, 1));
  helpers.reserve(count > 0 ? count - 1 : 0);
  for (size_t t = 1; t < count; ++t) helpers.emplace_back(work);
  work();  // the caller takes its share
  for (std::thread& t : helpers) t.join();
}

}  // namespace tessera
