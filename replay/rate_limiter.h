// Copyright dreplay authors.
//
// rate_limiter.h: the samples-per-insert (SPI) rate limiter of a replay
// memory, the same in the buffer node's sampler and in the learner
// placement's local memory.
//
// A learner that samples each transition many times (DQN samples ~8 per
// insert; a fast learner on a slow actor fleet far more) moves more bytes
// across the long link than the transitions it learns from, and a learner
// that samples too few wastes them. The limiter holds the ratio of
// transitions sampled to transitions inserted near `samples_per_insert`:
//
//   budget(inserted) = samples_per_insert * (inserted - min_size_to_sample)
//
//   sampling n more is allowed  when  sampled + n <= budget + error_buffer
//                               (and the memory holds min_size_to_sample);
//   inserting is "too far ahead" when  budget - sampled > error_buffer
//                               (and the memory holds min_size_to_sample),
//                               which pauses inserts only with block_inserts.
//
// So once sampling has started, sampled stays within error_buffer of the
// budget from above always, and from below too when inserts may block.
// Actors at the edge must not stall, so inserts never block by default: a
// learner slower than the actors then samples less than the target, which
// achieved_samples_per_insert() shows. samples_per_insert == 0 turns the
// limiter off (sampling is limited only by min_size_to_sample).
//
// Inserts never block while the memory holds fewer than min_size_to_sample
// transitions: sampling cannot go on until inserts refill it, so blocking
// them would stop both sides for good. The memory can shrink below that size
// after sampling started: the buffer node evicts the slots an actor is
// overwriting ahead of ingest (a lease's window), as many as a window per
// lease.
//
//   RateLimiterOptions o;
//   o.samples_per_insert = 4;
//   o.min_size_to_sample = 1000;
//   o.error_buffer = 1024;
//   RateLimiter limiter(o);
//   limiter.Inserted(k);                       // after k transitions are in
//   if (limiter.CanSample(batch, size)) { ...; limiter.Sampled(batch); }
//   if (!limiter.InsertsBlocked(size)) { ...insert... }
//
// Thread safety: none; one thread owns a RateLimiter (the replay core, or
// the learner loop).

#ifndef DREPLAY_REPLAY_RATE_LIMITER_H_
#define DREPLAY_REPLAY_RATE_LIMITER_H_

#include <cstdint>

#include "absl/status/status.h"

namespace dreplay::replay {

struct RateLimiterOptions {
  // Target transitions sampled per transition inserted; 0: no limit. >= 0.
  double samples_per_insert = 0;
  // No sampling until the memory holds this many transitions; also where
  // the budget starts. >= 1.
  uint64_t min_size_to_sample = 1;
  // Slack around the budget, in sampled transitions. >= 0; with a limit it
  // must cover one batch, or sampling could never start.
  double error_buffer = 0;
  // Report inserts as blocked when they run more than error_buffer ahead of
  // the budget (the caller pauses them).
  bool block_inserts = false;

  // OK, or InvalidArgument naming the bad field and value. `batch_size` is
  // the largest sample the caller asks for at once.
  absl::Status Validate(uint32_t batch_size) const;
};

class RateLimiter {
 public:
  // REQUIRES: options.Validate(batch) is OK for the caller's batch size.
  explicit RateLimiter(const RateLimiterOptions& options);

  // True when `n` more transitions may be sampled from a memory holding
  // `size` transitions.
  bool CanSample(uint64_t n, uint64_t size) const;
  // True when inserts must pause (only with block_inserts) in front of a
  // memory holding `size` transitions.
  bool InsertsBlocked(uint64_t size) const;

  void Inserted(uint64_t n) { inserted_ += n; }
  void Sampled(uint64_t n) { sampled_ += n; }

  // Counts so far, for example restored from a checkpoint.
  void Reset(uint64_t inserted, uint64_t sampled);

  uint64_t inserted() const { return inserted_; }
  uint64_t sampled() const { return sampled_; }
  // sampled / inserted; 0 before anything was inserted.
  double achieved_samples_per_insert() const;
  const RateLimiterOptions& options() const { return options_; }

 private:
  // samples_per_insert * (inserted - min_size_to_sample); negative before
  // min_size_to_sample transitions were inserted.
  double Budget() const;

  const RateLimiterOptions options_;
  uint64_t inserted_ = 0;
  uint64_t sampled_ = 0;
};

}  // namespace dreplay::replay

#endif  // DREPLAY_REPLAY_RATE_LIMITER_H_
