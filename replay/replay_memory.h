// Copyright dreplay authors.
//
// replay_memory.h: prioritized experience replay over the indices of a slot
// ring (Schaul et al., "Prioritized Experience Replay").
//
// The memory is storage-agnostic: it knows, for each of `capacity` ring
// indices, which sequence number the index holds and its priority, and it
// samples indices. The transitions themselves stay where they are: in the
// server's slot ring (replay_server) or, in the learner placement, in a
// local ReplayRegions (regions.h) whose slot ring the learner fills from the
// server's. FIFO eviction is the ring's: inserting at an index replaces what
// the index held.
//
//   ReplayMemoryOptions options;
//   options.capacity = 1 << 20;
//   ASSIGN_OR_RETURN(auto memory, ReplayMemory::Create(options));
//   memory->Insert(index, sequence, initial_priority);
//   int n = memory->SampleBatch(batch_size, beta, absl::MakeSpan(items));
//   memory->UpdatePriority(items[0].index, items[0].sequence, new_priority);
//
// Priorities: a raw priority p (e.g. |TD error|, >= 0, finite) is stored as
// (p + epsilon)^alpha. Insert() with p <= 0 or not finite (the actor had no
// estimate) stores the current maximum stored value (initial_max_priority
// while empty), the usual "new experiences get max priority" rule.
//
// Sampling: stratified proportional. The total T is cut into B equal
// segments and one uniform draw is made in each, index j landing in
// [j T / B, (j + 1) T / B). P(i) = p_i^alpha / T. Importance-sampling
// weights w_i = (N P(i))^-beta / max_j w_j with N = size() and the max taken
// over the batch (as Ape-X and Dopamine do; no min-tree needed), so the
// largest weight of a batch is 1. kUniform stores 1 for every valid index,
// which makes every draw uniform over valid indices and every weight 1.
//
// Randomness: a 64-bit Mersenne Twister seeded from options.seed; doubles are
// built from its top 53 bits, so a seed gives the same draws everywhere.
//
// Thread safety: none. One thread owns a ReplayMemory (the replay core, or
// the learner's training loop). No allocation after Create().

#ifndef DREPLAY_REPLAY_REPLAY_MEMORY_H_
#define DREPLAY_REPLAY_REPLAY_MEMORY_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "replay/sum_tree.h"

namespace dreplay::replay {

enum class SamplingMode : uint32_t { kPrioritized = 0, kUniform = 1 };

struct ReplayMemoryOptions {
  uint64_t capacity = 0;  // a power of two, as LayoutConfig::capacity
  SamplingMode mode = SamplingMode::kPrioritized;
  // Prioritization exponent, in [0, 1]: 0 is uniform sampling (with IS
  // weights of 1), 1 fully proportional. 0.6 is the paper's value for
  // proportional prioritization.
  double alpha = 0.6;
  // Added to raw priorities so no transition has probability 0. > 0.
  double priority_epsilon = 1e-6;
  // Stored value given to an insert without an estimate while empty. > 0.
  double initial_max_priority = 1.0;
  uint64_t seed = 1;

  // OK, or InvalidArgument naming the bad field and value.
  absl::Status Validate() const;
};

// Linear annealing of the IS exponent beta from `initial` to `final` over
// `steps` batches, then constant (Schaul et al.: 0.4 -> 1).
struct BetaSchedule {
  double initial = 0.4;
  double final = 1.0;
  uint64_t steps = 100000;

  absl::Status Validate() const;
  double At(uint64_t step) const;
};

struct SampledItem {
  uint64_t index = 0;
  uint64_t sequence = 0;
  double probability = 0;  // P(i) when drawn
  float weight = 0;        // filled by ComputeWeights / SampleBatch
  // The stored value p^alpha of the index when drawn (probability times
  // the total then), what a staged batch carries (protocol::BatchEntry).
  double priority_alpha = 0;
};

// Told before an index's entry (its sequence) changes: by Insert and by a
// Remove of a valid index; not by priority updates, Clear or Restore. The
// replay server's incremental checkpoint cut (replay_server/checkpoint/incremental_cut.h)
// saves an entry there before it is replaced.
class ReplayMemoryObserver {
 public:
  virtual ~ReplayMemoryObserver() = default;
  // `index` still holds its old entry when this is called.
  virtual void BeforeEntryChange(uint64_t index) = 0;
};

class ReplayMemory {
 public:
  enum class UpdateResult : uint8_t {
    kApplied,
    kStale,    // the index no longer holds that sequence (or holds nothing)
    kInvalid,  // index out of range, or priority negative / not finite
  };

  static constexpr uint64_t kNoSequence = std::numeric_limits<uint64_t>::max();

  static absl::StatusOr<std::unique_ptr<ReplayMemory>> Create(const ReplayMemoryOptions& options);

  const ReplayMemoryOptions& options() const { return options_; }
  uint64_t capacity() const { return options_.capacity; }
  // Valid (inserted, not removed or evicted) indices.
  uint64_t size() const { return size_; }
  // Sum and max of the stored values p^alpha.
  double total_priority() const { return tree_.Total(); }
  double max_priority() const { return tree_.Max(); }

  // Index `index` now holds `sequence` with raw priority `raw_priority`.
  // Replaces (evicts) whatever the index held. REQUIRES: index < capacity,
  // sequence != kNoSequence.
  void Insert(uint64_t index, uint64_t sequence, float raw_priority);
  // Index `index` holds nothing any more (its data was overwritten).
  void Remove(uint64_t index);
  // Insert(first_index + k, first_sequence + k, raw_priorities[k]) for every
  // k in order, with the same result (observer calls, size, stored values
  // and the tree bit for bit), but the tree's ancestors are recomputed once
  // per level for the whole run (SumTree::SetRange). REQUIRES: first_index +
  // raw_priorities.size() <= capacity; no sequence is kNoSequence.
  void InsertRun(uint64_t first_index, uint64_t first_sequence,
                 absl::Span<const float> raw_priorities);
  // Remove(first_index + k) for k < count, the tree updated once per level.
  // REQUIRES: first_index + count <= capacity.
  void RemoveRun(uint64_t first_index, uint64_t count);
  // Removes everything.
  void Clear();
  // Tells `observer` (not owned; nullptr: none) of every entry change from
  // now on (see ReplayMemoryObserver). Same thread as the memory's.
  void set_observer(ReplayMemoryObserver* observer) { observer_ = observer; }

  // Sets the raw priority of `index` if it still holds `sequence`.
  UpdateResult UpdatePriority(uint64_t index, uint64_t sequence, float raw_priority);

  bool valid(uint64_t index) const { return sequences_[index] != kNoSequence; }
  // The sequence held by `index`, or kNoSequence.
  uint64_t sequence(uint64_t index) const { return sequences_[index]; }
  // The stored value p^alpha of `index` (0 when invalid).
  double stored_priority(uint64_t index) const { return tree_.Get(index); }
  // The stored value a raw priority maps to (for tests and checkpoints).
  double StoredValue(float raw_priority) const;
  // Rank keys, one per index, in both modes: the raw priority last set
  // (Insert, InsertRun, UpdatePriority), +infinity for an insert without an
  // estimate (not a finite value > 0: it ranks with the highest, as a
  // prioritized memory stores it; RankKey), NaN for an invalid index and for an index restored
  // from a checkpoint (which keeps stored values, not raw priorities) until
  // it is set again. For ranking what the memory holds
  // (replay_server/crossing_percentiles.h); one float per index.
  absl::Span<const float> rank_keys() const { return rank_keys_; }
  float rank_key(uint64_t index) const { return rank_keys_[index]; }
  static float RankKey(float raw_priority);

  // One draw from stratum `stratum` of `num_strata` equal parts of the
  // total. REQUIRES: size() > 0, stratum < num_strata.
  SampledItem SampleOne(uint32_t stratum, uint32_t num_strata);

  // out.size() draws, draw k from stratum k of `num_strata`, found with
  // SumTree::FindBatch (cache misses overlap). Weights are not filled.
  // REQUIRES: size() > 0, out.size() <= num_strata.
  void SampleStrata(uint32_t num_strata, absl::Span<SampledItem> out);

  // Prefetches what UpdatePriority / Insert / Remove of `index` touch; call
  // it a few indices ahead when updating scattered indices.
  // REQUIRES: index < capacity.
  void Prefetch(uint64_t index) const;

  // Fills item.weight for each item from its probability: (N P)^-beta,
  // normalized by the largest in `items`.
  void ComputeWeights(double beta, absl::Span<SampledItem> items) const;

  // Stratified batch of min(batch_size, out.size()) draws with weights.
  // Returns the number of items filled (0 when the memory is empty).
  int SampleBatch(uint32_t batch_size, double beta, absl::Span<SampledItem> out);

  // Bulk load for checkpoint restore: stored values (p^alpha, not raw) and
  // sequences for every index. InvalidArgument on wrong lengths, or a
  // negative / non-finite value, or a valid index with a zero value.
  absl::Status Restore(absl::Span<const double> stored_values,
                       absl::Span<const uint64_t> sequences);

  // Uniform double in [0, 1) from the generator (exposed for tests).
  double NextUniform();

 private:
  explicit ReplayMemory(const ReplayMemoryOptions& options);
  // True when Insert stores the tree's current max for `raw_priority` (a
  // missing estimate: not a finite value > 0; prioritized mode).
  bool InsertReadsMax(float raw_priority) const;
  // The stored value Insert gives `raw_priority`.
  double InsertValue(float raw_priority) const;

  const ReplayMemoryOptions options_;
  SumTree tree_;
  std::vector<uint64_t> sequences_;
  std::vector<float> rank_keys_;
  uint64_t size_ = 0;
  std::mt19937_64 rng_;
  ReplayMemoryObserver* observer_ = nullptr;
  std::vector<double> run_values_;  // InsertRun's and RemoveRun's scratch
};

// Gathers inserts into runs of consecutive indices and sequences for
// ReplayMemory::InsertRun: Add() appends to the current run, or flushes it
// first when the insert does not continue it; Flush() inserts what is
// gathered. Until then the memory does not hold the gathered inserts.
// Same thread as the memory's.
class InsertRunBuffer {
 public:
  // `memory` is not owned. `expected_run`: inserts reserved for up front.
  InsertRunBuffer(ReplayMemory* memory, size_t expected_run);

  void Add(uint64_t index, uint64_t sequence, float raw_priority);
  void Flush();

 private:
  ReplayMemory* const memory_;
  uint64_t first_index_ = 0;
  uint64_t first_sequence_ = 0;
  std::vector<float> priorities_;
};

}  // namespace dreplay::replay

#endif  // DREPLAY_REPLAY_REPLAY_MEMORY_H_
