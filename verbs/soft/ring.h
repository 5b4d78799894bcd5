// Copyright dreplay authors.
//
// ring.h: a growable FIFO on one contiguous array.
//
// The soft provider's queues (send queue, completions, outgoing frames) push
// at the back and pop at the front millions of times a second; std::deque
// allocates a block for every large element, this ring allocates only when
// it grows. Elements are moved when it grows, so pointers into it are valid
// only until the next push. Not thread-safe.

#ifndef DREPLAY_VERBS_SOFT_RING_H_
#define DREPLAY_VERBS_SOFT_RING_H_

#include <cstddef>
#include <utility>
#include <vector>

#include "glog/logging.h"

namespace dreplay::verbs::soft {

template <typename T>
class Ring {
 public:
  Ring() = default;
  Ring(Ring&&) = default;
  Ring& operator=(Ring&&) = default;

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  // The i-th element from the front.
  T& operator[](size_t i) {
    DCHECK_LT(i, size_);
    return slots_[(head_ + i) & (slots_.size() - 1)];
  }
  const T& operator[](size_t i) const {
    DCHECK_LT(i, size_);
    return slots_[(head_ + i) & (slots_.size() - 1)];
  }
  T& front() { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }

  // Appends a default-constructed element and returns it.
  T& emplace_back() {
    if (size_ == slots_.size()) Grow();
    T& slot = slots_[(head_ + size_) & (slots_.size() - 1)];
    slot = T();
    ++size_;
    return slot;
  }
  void push_back(T value) { emplace_back() = std::move(value); }

  void pop_front() {
    DCHECK_GT(size_, 0u);
    slots_[head_] = T();  // release what the element owns
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }

  // Removes the elements for which `drop(element)` is true, keeping the
  // order of the others.
  template <typename Pred>
  void RemoveIf(Pred drop) {
    Ring kept;
    for (size_t i = 0; i < size_; ++i) {
      if (!drop((*this)[i])) kept.push_back(std::move((*this)[i]));
    }
    *this = std::move(kept);
  }

  void clear() { *this = Ring(); }

 private:
  static constexpr size_t kInitialSlots = 16;
  static_assert((kInitialSlots & (kInitialSlots - 1)) == 0, "capacity must be a power of two");

  void Grow() {
    std::vector<T> bigger(slots_.empty() ? kInitialSlots : slots_.size() * 2);
    for (size_t i = 0; i < size_; ++i) bigger[i] = std::move((*this)[i]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;  // size is zero or a power of two
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_RING_H_
