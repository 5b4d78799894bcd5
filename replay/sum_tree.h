// Copyright dreplay authors.
//
// sum_tree.h: a complete tree of fanout 8 over `capacity` (a power of two)
// non-negative leaf values, keeping the sum and the maximum of every subtree.
//
//   SumTree tree(1024);
//   tree.Set(7, 2.5);
//   uint64_t leaf = tree.Find(u * tree.Total());   // u uniform in [0, 1)
//
// Find(prefix) returns the leaf whose cumulative range contains `prefix`,
// which draws leaf i with probability value(i) / Total() when prefix is
// uniform in [0, Total()): proportional sampling in O(log capacity).
//
// Layout: level 0 holds the leaf values; level l + 1 holds, for every group
// of 8 consecutive nodes of level l, their sum and their maximum, in two
// arrays. The 8 values a descent or an update reads at each level are one
// aligned cache line, so a descent through a tree too large for the cache
// takes log8(capacity) misses (6 for 2^18 leaves, against 18 for a binary
// tree), and the tree takes about 10.3 bytes per leaf instead of 32.
//
// No drift: Set() recomputes every ancestor as the sum, left to right, of
// its 8 children instead of adding a delta, so each internal node is always
// exactly the value a full rebuild from the leaves would give, whatever the
// history of updates (sum_tree_test checks this bit for bit after millions
// of random updates). The root differs from the exact real sum of the leaves
// by at most 7 roundings per level, relative error below
// 7 * levels * 2^-53.
//
// Thread safety: none; one thread owns a tree (the replay core).

#ifndef DREPLAY_REPLAY_SUM_TREE_H_
#define DREPLAY_REPLAY_SUM_TREE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"

namespace dreplay::replay {

class SumTree {
 public:
  // REQUIRES: capacity is a power of two >= 1. All leaves start at 0.
  explicit SumTree(uint64_t capacity);

  uint64_t capacity() const { return capacity_; }

  // REQUIRES: index < capacity, value >= 0 and finite. O(log capacity).
  void Set(uint64_t index, double value);
  double Get(uint64_t index) const { return sums_[0][index]; }
  // Sets leaves first .. first + values.size() - 1 to `values`, then
  // recomputes their ancestors level by level, each once: O(n + log
  // capacity) instead of n Set() calls' O(n log capacity). The tree ends
  // exactly as after those calls (every node is recomputed from its
  // children). REQUIRES: first + values.size() <= capacity, every value >= 0
  // and finite.
  void SetRange(uint64_t first, absl::Span<const double> values);

  double Total() const { return sums_[top_][0]; }
  // The largest leaf value (0 when all are 0).
  double Max() const { return MaxOf(top_, 0); }

  // The leaf i with value(i) > 0 whose cumulative range [S(i), S(i) +
  // value(i)) contains `prefix`, where S(i) is the sum of the leaves before
  // i. Values of prefix beyond Total() (rounding) give the last positive
  // leaf; negative ones the first. Never returns a zero leaf.
  // REQUIRES: Total() > 0.
  uint64_t Find(double prefix) const;

  // out[k] = Find(prefixes[k]) for every k, with the same results, but the
  // descents run level by level with prefetches, so the cache misses of
  // different paths overlap (a large tree does not fit in cache: each level
  // of a lone descent is a miss). REQUIRES: Total() > 0, out.size() >=
  // prefixes.size().
  void FindBatch(absl::Span<const double> prefixes, absl::Span<uint64_t> out) const;

  // Prefetches the nodes a Set(index, ...) reads and writes; call it a few
  // updates ahead when updating scattered indices.
  void PrefetchPath(uint64_t index) const;

  // Sets every leaf to 0.
  void Clear();
  // Recomputes every internal node from the leaves (after SetLeafNoUpdate).
  void Rebuild();
  // Sets a leaf without updating its ancestors; call Rebuild() afterwards.
  // For bulk loads (checkpoint restore): O(capacity) instead of
  // O(capacity log capacity).
  void SetLeafNoUpdate(uint64_t index, double value);

 private:
  static constexpr uint64_t kFanout = 8;
  // A 64-byte aligned array of doubles (8 per cache line), zero-filled.
  struct AlignedFree {
    void operator()(double* p) const;
  };
  using Doubles = std::unique_ptr<double[], AlignedFree>;
  static Doubles AllocateZeroed(uint64_t count);
  // `nodes` rounded up to whole groups of 8.
  static uint64_t Padded(uint64_t nodes) { return (nodes + kFanout - 1) / kFanout * kFanout; }

  // Recomputes node j of level l (l >= 1) from its 8 children.
  void Recompute(size_t level, uint64_t j);
  // The maximum of node j of level l (level 0: the leaf value).
  double MaxOf(size_t level, uint64_t j) const {
    return level == 0 ? sums_[0][j] : maxes_[level][j];
  }
  // One step of Find's descent: from node j of level l (l >= 1, its sum
  // > 0) to the child of level l - 1 the prefix falls in.
  uint64_t Descend(size_t level, uint64_t j, double* prefix) const;

  const uint64_t capacity_;
  // Per level: its node count, rounded up to a whole group of 8; the last
  // level has one node (the root). maxes_[0] is unused (a leaf's max is its
  // value).
  std::vector<uint64_t> sizes_;
  std::vector<Doubles> sums_;
  std::vector<Doubles> maxes_;
  size_t top_ = 0;  // the root's level
};

}  // namespace dreplay::replay

#endif  // DREPLAY_REPLAY_SUM_TREE_H_
