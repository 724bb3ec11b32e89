// Mutex and MutexLock: the lock Tessera's services guard shared state with (ABSL_GUARDED_BY).
// absl::Mutex in every build but the ThreadSanitizer one.
//
// Why the exception: Debian's libabsl is not built with ThreadSanitizer, so TSan never sees
// absl::Mutex lock or unlock (the fast path is an atomic in uninstrumented code) and reports
// every access it guards as a race. In a TSan build (`make test-tsan`) the same names are a
// std::mutex, which TSan intercepts. The thread-safety annotations are the same in both.
//
// Example:
//   mutable Mutex mu_;
//   int count_ ABSL_GUARDED_BY(mu_);
//   void Add() { MutexLock lock(&mu_); ++count_; }
#pragma once

#include "absl/base/thread_annotations.h"

#if defined(__SANITIZE_THREAD__)
#include <mutex>
#else
#include "absl/synchronization/mutex.h"
#endif

namespace tessera {

#if defined(__SANITIZE_THREAD__)

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

 private:
  Mutex* const mu_;
};

#else

using Mutex = absl::Mutex;
using MutexLock = absl::MutexLock;

#endif

}  // namespace tessera
