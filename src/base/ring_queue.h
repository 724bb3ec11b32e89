// A first-in first-out queue in one array used as a ring, for queues pushed and popped at a high
// rate that stay about the same length (a simulator's per-step windows): once it has grown to
// the longest it gets, a push or pop allocates nothing, where std::deque allocates and frees a
// block every few hundred bytes that pass through it.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace tessera {

template <typename T>
class RingQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // The oldest element; the queue must not be empty.
  const T& front() const { return slots_[head_]; }
  T& front() { return slots_[head_]; }
  // The i-th oldest (0: front); i < size().
  const T& operator[](size_t i) const { return slots_[(head_ + i) & (slots_.size() - 1)]; }

  template <typename... Args>
  void emplace_back(Args&&... args) {
    if (size_ == slots_.size()) Grow();
    slots_[(head_ + size_) & (slots_.size() - 1)] = T{std::forward<Args>(args)...};
    ++size_;
  }
  void push_back(T value) { emplace_back(std::move(value)); }
  // Drops the oldest element; the queue must not be empty.
  void pop_front() {
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }

 private:
  // Doubles the ring (a power of two, so that an index wraps with a mask), oldest first.
  void Grow() {
    std::vector<T> bigger(slots_.empty() ? 16 : 2 * slots_.size());
    for (size_t i = 0; i < size_; ++i)
      bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace tessera
