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

}  // namespace tessera
