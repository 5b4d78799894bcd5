// Copyright dreplay authors.
//
// arrays.h: C++ vectors handed to NumPy without a copy (each array owns its
// vector), and decoded transitions as arrays, for the bindings' readers.

#ifndef DREPLAY_PYTHON_ARRAYS_H_
#define DREPLAY_PYTHON_ARRAYS_H_

#include <utility>
#include <vector>

#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"
#include "rl/transition.h"

namespace dreplay::python {

// `values` as an array of `shape`; the array owns them. Needs the GIL.
template <typename T>
pybind11::array_t<T> ToArray(std::vector<T>&& values, std::vector<pybind11::ssize_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  pybind11::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return pybind11::array_t<T>(shape, owned->data(), free_when_done);
}

// Sets d["observations"], "actions", "rewards", "discounts", "dones" and
// "next_observations" to copies of `t`'s columns. Needs the GIL.
inline void AddTransitionArrays(const rl::TransitionBatch& t, pybind11::dict* d) {
  const auto n = static_cast<pybind11::ssize_t>(t.size());
  const auto m = static_cast<pybind11::ssize_t>(t.observation_size());
  // TransitionBatch's vectors are const: copy them once (small next to the
  // payloads, which are not copied again).
  (*d)["observations"] = ToArray(std::vector<float>(t.observations()), {n, m});
  (*d)["actions"] = ToArray(std::vector<int64_t>(t.actions()), {n});
  (*d)["rewards"] = ToArray(std::vector<float>(t.rewards()), {n});
  (*d)["discounts"] = ToArray(std::vector<float>(t.discounts()), {n});
  (*d)["dones"] = ToArray(std::vector<float>(t.dones()), {n});
  (*d)["next_observations"] = ToArray(std::vector<float>(t.next_observations()), {n, m});
}

}  // namespace dreplay::python

#endif  // DREPLAY_PYTHON_ARRAYS_H_
