// Copyright dreplay authors.
//
// learner_cache.h: what the connected learner holds (transfer-once staging),
// and the hand-off of "a learner connected" from the accept thread to the
// replay core.
//
// A learner that says learner_cache in its hello (protocol/handshake.h) keeps
// every transition it receives, keyed by (slot index, sequence). The server
// mirrors that exactly in LearnerHoldings, one word per slot:
//
//   held(i) == CommitValue(q)   the learner holds sequence q of slot i
//   held(i) == 0                nothing known
//
// A batch's entries are marked held when the batch is staged: the learner
// READs batches in order and keeps what each carried before it looks up the
// next one's references, so the batches staged ahead of the learner's
// priority updates need not carry a slot again. A batch released by the
// update timeout may never have been READ (a paused learner skips it): its
// entries are forgotten then, and a later batch that referred to them is a
// miss the learner counts and leaves out. The sampler then stages
// an entry whose slot is held with the drawn sequence as a reference
// (kEntryCachedBit, no copied slot). The key carries the sequence, and the
// sampler draws (index, sequence) pairs the memory holds now, so a slot
// overwritten by a newer sequence is always staged with its payload: the
// learner is never served a stale transition.
//
// Holdings are forgotten on every new learner connection and every new
// epoch: a learner that reconnects starts with an empty cache.
//
// Thread hand-off (LearnerEvents): the accept thread decodes the hello, the
// replay core owns the holdings. The accept thread Post()s the event into
// one atomic word (a generation number and the learner_cache bit, so the two
// can never be seen apart); the core Take()s it at the start of its next
// step, forgets the holdings, and Ack()s the generation. The accept thread
// waits for that Ack (WaitAcked) before it answers the handshake, so the new
// learner cannot READ a batch staged with references to its predecessor's
// holdings (the core releases those, see ReplayCore).

#ifndef DREPLAY_REPLAY_SERVER_LEARNER_CACHE_H_
#define DREPLAY_REPLAY_SERVER_LEARNER_CACHE_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "protocol/layout.h"

namespace dreplay::server {

// The connected learner's holdings, one word per slot. Thread safety: none;
// the replay core owns it.
class LearnerHoldings {
 public:
  explicit LearnerHoldings(uint64_t capacity) : held_(capacity, 0) {}

  // True when the learner holds sequence `sequence` of slot `index`.
  bool Holds(uint64_t index, uint64_t sequence) const {
    return held_[index] == protocol::CommitValue(sequence);
  }
  // The learner received sequence `sequence` of slot `index` (a newer one
  // replaces what it held there).
  void MarkHeld(uint64_t index, uint64_t sequence) {
    held_[index] = protocol::CommitValue(sequence);
  }
  // Forgets what the learner holds in slot `index`.
  void Forget(uint64_t index) { held_[index] = 0; }
  // Forgets everything.
  void Clear();
  // Slots held (linear scan, for tests).
  uint64_t CountHeld() const;

 private:
  std::vector<uint64_t> held_;
};

// "A learner connected, with or without the cache", from the accept thread
// to the replay core. Post, WaitAcked: any thread; Take, Ack: the core only.
class LearnerEvents {
 public:
  struct Event {
    uint64_t generation = 0;  // 1, 2, ... per connection
    bool learner_cache = false;
  };

  // Records a new learner connection; returns its generation.
  uint64_t Post(bool learner_cache);
  // The latest event if it is newer than the last one taken; false if none.
  bool Take(Event* event);
  // The core has applied the event of `generation` (and all before it).
  void Ack(uint64_t generation);
  // Waits until Ack(generation) or `timeout`; true if acknowledged. Polls
  // (the core acknowledges within one step).
  bool WaitAcked(uint64_t generation, absl::Duration timeout) const;

 private:
  // (generation << 1) | learner_cache.
  std::atomic<uint64_t> posted_{0};
  std::atomic<uint64_t> acked_{0};
  uint64_t taken_ = 0;  // core only
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_LEARNER_CACHE_H_
