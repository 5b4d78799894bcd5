// Copyright dreplay authors.
//
// forward_queue.h: the FIFO forwarder's queue (SamplerOptions::forward ==
// kForwardFifo). It holds the newest `bound` transitions ingest handled, in
// the order ingest handled them, and gives them oldest first: a push
// forwarder with a drop-oldest queue.
//
//   ForwardQueue queue(config, 4096, leases_region, control);
//   queue.Restart();                     // nothing queued: from the journal's end
//   ...                                  // every replay core step:
//   dropped += queue.Refill();           // what ingest journalled since
//   while (queue.size() > 0) {
//     const QueuedTransition t = queue.PopFront();   // slot index, lease sequence
//     ...
//   }
//
// The order is the forward journal's (protocol/leases.h): each entry is a
// run of one lease's sequences that one ingest step handled. Refill() takes
// the entries appended since its last call from the server's own leases
// region (the core's thread writes them; nothing crosses a link), then
// drops from the front until at most `bound` transitions are queued, and
// returns how many it dropped. The queue does not know whether a queued
// slot still holds its sequence: the sampler checks that when it copies.
// Call Refill() every step: the journal is a ring of kJournalEntries, and
// entries overwritten before they were taken are lost (their runs are
// unknown; counted in journal_entries_lost()).
//
// Thread safety: none; the replay core's thread owns it. Nothing allocates
// after construction (a ring of bound + 1 runs).

#ifndef DREPLAY_REPLAY_SERVER_FORWARD_QUEUE_H_
#define DREPLAY_REPLAY_SERVER_FORWARD_QUEUE_H_

#include <cstdint>
#include <vector>

#include "protocol/layout.h"

namespace dreplay::server {

struct QueuedTransition {
  uint64_t index = 0;     // the slot's ring index
  uint64_t sequence = 0;  // the lease's sequence it should hold
};

class ForwardQueue {
 public:
  // `leases_region` and `control` are the server's regions for `config`,
  // not owned. REQUIRES: bound >= 1.
  ForwardQueue(const protocol::LayoutConfig& config, uint64_t bound, const uint8_t* leases_region,
               const protocol::ControlBlock* control);

  // Empties the queue and continues from the journal's end now (a new
  // epoch: after a restore, the journal's restored end).
  void Restart();
  // Takes the journal's new entries, then drops the oldest transitions
  // beyond the bound. Returns the transitions dropped.
  uint64_t Refill();
  // Transitions queued.
  uint64_t size() const { return size_; }
  // Removes and returns the oldest. REQUIRES: size() > 0.
  QueuedTransition PopFront();
  // Journal entries overwritten before Refill() took them.
  uint64_t journal_entries_lost() const { return journal_entries_lost_; }

 private:
  struct Run {
    uint32_t lease = 0;
    uint64_t first = 0;  // the next sequence of the run to give
    uint64_t count = 0;  // sequences left in the run
  };
  uint64_t JournalEnd() const;
  void Push(const Run& run);
  // Drops `n` <= size() transitions from the front.
  void DropFront(uint64_t n);

  const protocol::LayoutConfig config_;
  const uint64_t bound_;
  const uint8_t* const leases_region_;
  const protocol::ControlBlock* const control_;
  std::vector<Run> runs_;  // a ring of bound + 1 runs
  uint64_t head_ = 0;      // the oldest run's position in runs_
  uint64_t run_count_ = 0;
  uint64_t size_ = 0;        // transitions in the runs
  uint64_t next_entry_ = 0;  // the journal entry Refill() takes next
  uint64_t journal_entries_lost_ = 0;
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_FORWARD_QUEUE_H_
