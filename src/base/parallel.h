// Work shared among threads: each takes the next index as it finishes one.
#pragma once

#include <cstddef>
#include <functional>

namespace tessera {

// Runs fn(i) for every i in [0, n) on up to `threads` threads, the caller's among them (0 counts
// as 1), and returns once all have run. fn is called from several threads at once, each i once.
void ParallelFor(size_t n, size_t threads, const std::function<void(size_t)>& fn);

}  // namespace tessera
