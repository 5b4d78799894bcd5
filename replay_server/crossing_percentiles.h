// Copyright dreplay authors.
//
// crossing_percentiles.h: where the transitions that cross the link sit in
// the buffer node's priority distribution.
//
// For a staged batch, each copied entry (one that crosses; a reference to
// what the learner holds does not) gets the percentile of its rank key
// (ReplayMemory::rank_keys: its raw priority, the same quantity in every
// placement and sampling mode) among the keys of the entries the memory
// holds: 100 x (keys below + half the keys equal) / keys, mid-rank for
// ties. A prioritized draw gives more than 50 on average, a uniform or FIFO
// one about 50. The sampler measures one batch at most every `period`; the
// batches measured are a sample of those staged, so the mean is an estimate
// of the mean over every crossing transition. Ranking reads at most about
// kMaxRanked of the memory's keys: every step-th one (step = size /
// kMaxRanked, at least 1), from an offset that moves by one each batch, so
// a large memory costs what a small one does (a percentile's standard
// error from that sampling is then below 1 point, and averages out).
//
//   CrossingPercentiles percentiles(absl::Milliseconds(20));
//   if (percentiles.Due(now)) {
//     percentiles.Add(memory.rank_key(index));   // each crossing entry, as drawn
//     ...
//     percentiles.Finish(memory.rank_keys(), /*keys_left_memory=*/forwarding, now);
//   }
//   percentiles.sum() / percentiles.count();     // the mean percentile
//
// keys_left_memory: the entries were removed from the memory as they were
// copied (forwarding), so their own keys are ranked in with the memory's:
// every placement ranks against what the memory held before the batch.
// Keys that are NaN (an entry restored from a checkpoint, not yet updated)
// are neither ranked nor counted.
//
// Thread safety: none; the replay core's thread owns it. Nothing allocates
// after construction.

#ifndef DREPLAY_REPLAY_SERVER_CROSSING_PERCENTILES_H_
#define DREPLAY_REPLAY_SERVER_CROSSING_PERCENTILES_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"

namespace dreplay::server {

class CrossingPercentiles {
 public:
  static constexpr uint64_t kMaxRanked = 4096;

  // `max_batch`: the most keys one batch adds. REQUIRES: period >= 0.
  CrossingPercentiles(absl::Duration period, uint32_t max_batch);

  // Whether a batch staged at `now` is measured.
  bool Due(absl::Time now) const { return now >= next_; }
  // One crossing entry's rank key. REQUIRES: fewer than max_batch added
  // since the last Finish().
  void Add(float key);
  // Ranks the keys added among `memory_keys` (and themselves, when
  // `keys_left_memory`), adds their percentiles to sum() and count(), and
  // waits `period` from `now` before the next batch.
  void Finish(absl::Span<const float> memory_keys, bool keys_left_memory, absl::Time now);

  // Sum of the percentiles (0 to 100) of the transitions measured.
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  // Adds to less_ / equal_ (as difference arrays over sorted batch_) what
  // one memory key contributes, with `weight`.
  void RankAgainst(float key, double weight);

  const absl::Duration period_;
  absl::Time next_ = absl::InfinitePast();
  std::vector<float> batch_;   // keys added, sorted by Finish
  std::vector<double> less_;   // per sorted key: memory keys below it
  std::vector<double> equal_;  // per sorted key: memory keys equal to it
  uint32_t added_ = 0;
  uint64_t offset_ = 0;  // the first key read, modulo the step
  double sum_ = 0;
  uint64_t count_ = 0;
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_CROSSING_PERCENTILES_H_
