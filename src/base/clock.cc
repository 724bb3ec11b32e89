#include "base/clock.h"

#include <ctime>

#include "absl/time/clock.h"

namespace tessera {

absl::Time RealClock::Now() const {
  absl::Time now = absl::Now();
  MutexLock lock(&mu_);
  if (now < last_) {
    now = last_;
  }
  last_ = now;
  return now;
}

absl::Time SimulatedClock::Now() const {
  MutexLock lock(&mu_);
  return now_;
}

void SimulatedClock::Advance(absl::Duration delta) {
  if (delta <= absl::ZeroDuration()) {
    return;
  }
  MutexLock lock(&mu_);
  now_ += delta;
}

bool SimulatedClock::SetTime(absl::Time t) {
  MutexLock lock(&mu_);
  if (t < now_) {
    return false;
  }
  now_ = t;
  return true;
}

double ProcessCpuSeconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

double ThreadCpuSeconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace tessera
