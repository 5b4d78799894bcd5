// Copyright dreplay authors.

#include "replay/sum_tree.h"

#include <algorithm>
#include <cmath>
#include <new>

#include "glog/logging.h"

namespace dreplay::replay {

void SumTree::AlignedFree::operator()(double* p) const {
  ::operator delete[](p, std::align_val_t{64});
}

SumTree::Doubles SumTree::AllocateZeroed(uint64_t count) {
  auto* p = static_cast<double*>(::operator new[](count * sizeof(double), std::align_val_t{64}));
  std::fill(p, p + count, 0.0);
  return Doubles(p);
}

SumTree::SumTree(uint64_t capacity) : capacity_(capacity) {
  CHECK(capacity >= 1 && (capacity & (capacity - 1)) == 0)
      << "SumTree capacity " << capacity << " is not a power of two";
  // Level sizes rounded up to whole groups, so that every group of 8
  // children is one aligned line and a partial last group reads zeros.
  uint64_t nodes = capacity;
  while (true) {
    sizes_.push_back(nodes);
    sums_.push_back(AllocateZeroed(Padded(nodes)));
    maxes_.push_back(sums_.size() == 1 ? nullptr : AllocateZeroed(Padded(nodes)));
    if (nodes == 1) break;
    nodes = (nodes + kFanout - 1) / kFanout;
  }
  top_ = sums_.size() - 1;
}

inline void SumTree::Recompute(size_t level, uint64_t j) {
  const double* child_sums = sums_[level - 1].get() + j * kFanout;
  double sum = 0;
  double max = 0;
  for (uint64_t c = 0; c < kFanout; ++c) {
    sum += child_sums[c];
    max = std::max(max, MaxOf(level - 1, j * kFanout + c));
  }
  sums_[level][j] = sum;
  maxes_[level][j] = max;
}

// SetRange of one value, written out: priority updates call it per entry,
// and the range's loops cost about 3 % of sampling.
void SumTree::Set(uint64_t index, double value) {
  DCHECK_LT(index, capacity_);
  DCHECK(value >= 0 && std::isfinite(value)) << value;
  sums_[0][index] = value;
  uint64_t j = index;
  for (size_t level = 1; level <= top_; ++level) {
    j /= kFanout;
    Recompute(level, j);
  }
}

void SumTree::SetRange(uint64_t first, absl::Span<const double> values) {
  if (values.empty()) return;
  DCHECK_LE(first + values.size(), capacity_);
  for (size_t k = 0; k < values.size(); ++k) {
    DCHECK(values[k] >= 0 && std::isfinite(values[k])) << values[k];
    sums_[0][first + k] = values[k];
  }
  uint64_t lo = first;
  uint64_t hi = first + values.size() - 1;  // inclusive
  for (size_t level = 1; level <= top_; ++level) {
    lo /= kFanout;
    hi /= kFanout;
    for (uint64_t j = lo; j <= hi; ++j) Recompute(level, j);
  }
}

inline uint64_t SumTree::Descend(size_t level, uint64_t j, double* prefix) const {
  const double* child_sums = sums_[level - 1].get() + j * kFanout;
  // The first child whose range holds the prefix; never a zero subtree (this
  // node's sum is > 0, so some child is): past the last positive child, that
  // one.
  uint64_t last_positive = kFanout;
  for (uint64_t c = 0; c < kFanout; ++c) {
    const double s = child_sums[c];
    if (!(s > 0)) continue;
    if (*prefix < s) return j * kFanout + c;
    *prefix -= s;
    last_positive = c;
  }
  DCHECK_LT(last_positive, kFanout);
  *prefix += child_sums[last_positive];  // stay inside its range
  return j * kFanout + last_positive;
}

uint64_t SumTree::Find(double prefix) const {
  DCHECK_GT(Total(), 0);
  uint64_t j = 0;
  for (size_t level = top_; level >= 1; --level) j = Descend(level, j, &prefix);
  return j;
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
      out[k] = 0;
      prefix[k - begin] = prefixes[k];
    }
    // Every descent has the same depth: level by level, the children's line
    // of every descent is prefetched before any is read.
    for (size_t level = top_; level >= 1; --level) {
      const double* below = sums_[level - 1].get();
      for (size_t k = begin; k < end; ++k) __builtin_prefetch(below + out[k] * kFanout);
      for (size_t k = begin; k < end; ++k) out[k] = Descend(level, out[k], &prefix[k - begin]);
    }
  }
}

void SumTree::PrefetchPath(uint64_t index) const {
  uint64_t j = index;
  for (size_t level = 0; level <= top_; ++level) {
    const uint64_t group = j / kFanout * kFanout;
    __builtin_prefetch(sums_[level].get() + group, 1);
    if (level > 0) __builtin_prefetch(maxes_[level].get() + group, 1);
    j /= kFanout;
  }
}

void SumTree::Clear() {
  for (size_t level = 0; level <= top_; ++level) {
    const uint64_t padded = Padded(sizes_[level]);
    std::fill(sums_[level].get(), sums_[level].get() + padded, 0.0);
    if (level > 0) std::fill(maxes_[level].get(), maxes_[level].get() + padded, 0.0);
  }
}

void SumTree::SetLeafNoUpdate(uint64_t index, double value) {
  DCHECK_LT(index, capacity_);
  sums_[0][index] = value;
}

void SumTree::Rebuild() {
  for (size_t level = 1; level <= top_; ++level) {
    for (uint64_t j = 0; j < sizes_[level]; ++j) Recompute(level, j);
  }
}

}  // namespace dreplay::replay
