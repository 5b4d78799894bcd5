// Copyright dreplay authors.
//
// sum_tree.h: a complete binary tree over `capacity` (a power of two)
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
// No drift: Set() recomputes every ancestor as fl(left + right) from its two
// children instead of adding a delta, so each internal node is always exactly
// the value a full rebuild from the leaves would give, whatever the history
// of updates (sum_tree_test checks this bit for bit after millions of random
// updates). The root differs from the exact real sum of the leaves only by
// the rounding of log2(capacity) additions per level, relative error below
// log2(capacity) * 2^-53.
//
// Thread safety: none; one thread owns a tree (the replay core).

#ifndef DREPLAY_REPLAY_SUM_TREE_H_
#define DREPLAY_REPLAY_SUM_TREE_H_

#include <cstdint>
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
  double Get(uint64_t index) const { return nodes_[capacity_ + index].sum; }
  // Sets leaves first .. first + values.size() - 1 to `values`, then
  // recomputes their ancestors level by level, each once: O(n + log
  // capacity) instead of n Set() calls' O(n log capacity). The tree ends
  // exactly as after those calls (every node is recomputed from its
  // children). REQUIRES: first + values.size() <= capacity, every value >= 0
  // and finite.
  void SetRange(uint64_t first, absl::Span<const double> values);

  double Total() const { return nodes_[1].sum; }
  // The largest leaf value (0 when all are 0).
  double Max() const { return nodes_[1].max; }

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
  struct Node {
    double sum = 0;
    double max = 0;
  };
  void Recompute(uint64_t node);
  // One step of Find's descent from `node` (an internal node).
  uint64_t Descend(uint64_t node, double* prefix) const;

  const uint64_t capacity_;
  // Heap order: node 1 is the root, node k has children 2k and 2k+1, leaves
  // are nodes [capacity, 2 * capacity). Node 0 is unused.
  std::vector<Node> nodes_;
};

}  // namespace dreplay::replay

#endif  // DREPLAY_REPLAY_SUM_TREE_H_
