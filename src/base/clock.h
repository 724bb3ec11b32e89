// Clock: the only way Tessera code learns the time. Production code gets RealClock; tests and
// the simulator get SimulatedClock and move time explicitly, so the same policy code gives the
// same answer in the daemon, the CLI and the simulator.
//
// Example:
//   SimulatedClock clock(absl::FromUnixSeconds(0));
//   clock.Advance(absl::Seconds(5));
//   DoWork(clock.Now());
#pragma once

#include <memory>

#include "absl/time/time.h"
#include "base/mutex.h"

namespace tessera {

// Contract: Now() is thread-safe and never fails. Successive calls on one clock never go back.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// The wall clock (absl::Now), made monotone: it never returns a time before one it returned.
class RealClock final : public Clock {
 public:
  absl::Time Now() const override;

 private:
  mutable Mutex mu_;
  mutable absl::Time last_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// A clock that moves only when told. Thread-safe.
class SimulatedClock final : public Clock {
 public:
  explicit SimulatedClock(absl::Time start) : now_(start) {}
  absl::Time Now() const override;
  // Moves time forward by `delta`; a negative delta is ignored (time never goes back).
  void Advance(absl::Duration delta);
  // Sets the time to `t` if it is not before the current time; returns false (and does
  // nothing) otherwise.
  bool SetTime(absl::Time t);

 private:
  mutable Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

// CPU time this process has used, in seconds (for benchmarks that report CPU cost).
double ProcessCpuSeconds();
// CPU time the calling thread has used, in seconds (the cost of work run beside other work on
// other threads).
double ThreadCpuSeconds();

}  // namespace tessera
