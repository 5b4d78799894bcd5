// Copyright dreplay authors.

#include "replay/sum_tree.h"

#include <algorithm>
#include <cmath>

#include "glog/logging.h"

namespace dreplay::replay {

SumTree::SumTree(uint64_t capacity) : capacity_(capacity), nodes_(2 * capacity) {
  CHECK(capacity >= 1 && (capacity & (capacity - 1)) == 0)
      << "SumTree capacity " << capacity << " is not a power of two";
}

inline void SumTree::Recompute(uint64_t node) {
  const Node& l = nodes_[2 * node];
  const Node& r = nodes_[2 * node + 1];
  nodes_[node].sum = l.sum + r.sum;
  nodes_[node].max = std::max(l.max, r.max);
}

void SumTree::Set(uint64_t index, double value) {
  DCHECK_LT(index, capacity_);
  DCHECK(value >= 0 && std::isfinite(value)) << value;
  uint64_t node = capacity_ + index;
  nodes_[node].sum = value;
  nodes_[node].max = value;
  for (node >>= 1; node >= 1; node >>= 1) Recompute(node);
}

void SumTree::SetRange(uint64_t first, absl::Span<const double> values) {
  if (values.empty()) return;
  DCHECK_LE(first + values.size(), capacity_);
  uint64_t lo = capacity_ + first;
  uint64_t hi = lo + values.size() - 1;  // inclusive
  for (const double value : values) {
    DCHECK(value >= 0 && std::isfinite(value)) << value;
    nodes_[lo++] = Node{value, value};
  }
  lo = capacity_ + first;
  for (lo >>= 1, hi >>= 1; lo >= 1; lo >>= 1, hi >>= 1) {
    for (uint64_t node = lo; node <= hi; ++node) Recompute(node);
  }
}

inline uint64_t SumTree::Descend(uint64_t node, double* prefix) const {
  const uint64_t left = 2 * node;
  const double left_sum = nodes_[left].sum;
  // Go left when the prefix falls there, or when the right subtree is empty;
  // never enter a zero subtree (this node's sum is > 0, so at least one child
  // is).
  if (left_sum > 0 && (*prefix < left_sum || nodes_[left + 1].sum <= 0)) return left;
  *prefix -= left_sum;
  return left + 1;
}

uint64_t SumTree::Find(double prefix) const {
  DCHECK_GT(Total(), 0);
  uint64_t node = 1;
  while (node < capacity_) node = Descend(node, &prefix);
  return node - capacity_;
}

void SumTree::FindBatch(absl::Span<const double> prefixes, absl::Span<uint64_t> out) const {
  DCHECK_GT(Total(), 0);
  DCHECK_GE(out.size(), prefixes.size());
  const size_t n = prefixes.size();
  // `out` holds the current node of each descent, `prefix` its remainder
  // (kept in a fixed-size local array, chunk by chunk: no allocation).
  constexpr size_t kChunk = 64;
  double prefix[kChunk];
  for (size_t begin = 0; begin < n; begin += kChunk) {
    const size_t end = std::min(n, begin + kChunk);
    for (size_t k = begin; k < end; ++k) {
      out[k] = 1;
      prefix[k - begin] = prefixes[k];
    }
    // Every descent has the same depth (a complete tree).
    for (uint64_t level_size = 1; level_size < capacity_; level_size *= 2) {
      for (size_t k = begin; k < end; ++k) __builtin_prefetch(&nodes_[2 * out[k]]);
      for (size_t k = begin; k < end; ++k) out[k] = Descend(out[k], &prefix[k - begin]);
    }
    for (size_t k = begin; k < end; ++k) out[k] -= capacity_;
  }
}

void SumTree::PrefetchPath(uint64_t index) const {
  // The upper levels are small and stay in cache; the lower ones miss.
  for (uint64_t node = capacity_ + index; node >= 1; node >>= 1) {
    __builtin_prefetch(&nodes_[node], 1);
  }
}

void SumTree::Clear() { std::fill(nodes_.begin(), nodes_.end(), Node{}); }

void SumTree::SetLeafNoUpdate(uint64_t index, double value) {
  DCHECK_LT(index, capacity_);
  nodes_[capacity_ + index] = Node{value, value};
}

void SumTree::Rebuild() {
  for (uint64_t node = capacity_ - 1; node >= 1; --node) Recompute(node);
}

}  // namespace dreplay::replay
