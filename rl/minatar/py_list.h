// Copyright dreplay authors.
//
// py_list.h: a list with the semantics of a Python list of mutable objects,
// as far as MinAtar's Seaquest relies on them while it mutates lists it is
// iterating over.
//
//  - Elements are shared objects: an element taken from the list stays
//    valid, and changes to it stay visible, after it is removed.
//  - Remove(value) is `list.remove(value)`: it erases the first element that
//    compares equal to `value`, which may be another object than the one
//    `value` was read from.
//  - ForEachReversed(body) is `for x in reversed(list)`: an index that starts
//    at the end and goes down by one after each element, and that stops as
//    soon as it is outside the list as it is at that moment. After a removal
//    an element can be visited twice or skipped, exactly as in Python.
//
// Thread safety: none.

#ifndef DREPLAY_RL_MINATAR_PY_LIST_H_
#define DREPLAY_RL_MINATAR_PY_LIST_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "glog/logging.h"

namespace dreplay::rl::minatar {

template <typename T>
class PyList {
 public:
  using Element = std::shared_ptr<T>;

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  T& operator[](size_t i) const { return *items_[i]; }
  void Clear() { items_.clear(); }

  void Append(const T& value) { items_.push_back(std::make_shared<T>(value)); }

  // `list.remove(value)`. A missing value (ValueError in Python) is our bug.
  void Remove(const T value) {
    for (auto it = items_.begin(); it != items_.end(); ++it) {
      if (**it == value) {
        items_.erase(it);
        return;
      }
    }
    LOG(FATAL) << "PyList::Remove: no such element";
  }

  // `for x in reversed(list): body(x)`; `body` takes a T&.
  template <typename Body>
  void ForEachReversed(Body body) {
    for (std::ptrdiff_t i = static_cast<std::ptrdiff_t>(items_.size()) - 1;
         i >= 0 && i < static_cast<std::ptrdiff_t>(items_.size()); --i) {
      const Element item = items_[i];  // keeps the object alive if removed
      body(*item);
    }
  }

  // The elements in order, for reading.
  const std::vector<Element>& items() const { return items_; }

 private:
  std::vector<Element> items_;
};

}  // namespace dreplay::rl::minatar

#endif  // DREPLAY_RL_MINATAR_PY_LIST_H_
