// Copyright dreplay authors.
//
// priority_updates.h: the priority mailbox, both ends.
//
// Server side, PriorityUpdates::Consume(n, epoch) looks at mailbox entry
// n % staging_depth. The learner's update for batch n is there when the
// entry's commit line holds BatchCommitValue(n) (read with acquire). The entry
// is then copied out (word-wise atomic loads), checked (header batch number,
// epoch and incarnation, count <= batch_size, MailboxChecksum) and its
// records applied to
// the replay memory: a record whose slot no longer holds its sequence is
// dropped and counted stale; a bad index or priority value is counted
// invalid, and so is a record that names no entry (index and sequence) of
// the staged batch it answers: a learner updates what it was sent, nothing
// else. An entry that fails its checks is counted as a mailbox reject and
// still consumed: the learner believes it answered, so waiting for another
// answer would stall sampling forever.
//
// Priority values of a record (p, the learner's raw priority):
//
//   NaN, +inf, -inf, negative   invalid (counted); the entry keeps its priority
//   -0.0, 0                     applied as 0: stored epsilon^alpha, the lowest
//   denormal, other finite > 0  applied as is
//   above max_priority          applied as max_priority, counted bounded
//                               (priorities_bounded, with ingest's)
//
// The learner side builds entries with EncodePriorityUpdate() (protocol/mailbox.h).
//
// Thread safety: none; one thread (the replay core) owns a PriorityUpdates.
// Consume() never blocks and never allocates.

#ifndef DREPLAY_REPLAY_SERVER_PRIORITY_UPDATES_H_
#define DREPLAY_REPLAY_SERVER_PRIORITY_UPDATES_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "protocol/layout.h"
#include "replay/replay_memory.h"
#include "replay_server/counters.h"

namespace dreplay::server {

class PriorityUpdates {
 public:
  enum class Result : uint8_t {
    kNotReady,  // no update for that batch yet
    kApplied,   // consumed and applied (records may still be stale)
    kRejected,  // consumed but malformed: nothing applied
  };

  // `mailbox` (MailboxBytes(config)), `staging` (the staging ring, whose
  // slot of a batch holds it until its update is consumed), `memory` and
  // `counters` are not owned and must outlive this object. REQUIRES:
  // config.Validate() is OK; max_priority > 0 and finite.
  PriorityUpdates(const protocol::LayoutConfig& config, const uint8_t* mailbox,
                  const uint8_t* staging, float max_priority, replay::ReplayMemory* memory,
                  ReplayCounters* counters);

  // Consumes the update for batch `batch_number` of epoch `epoch`, staged
  // by server incarnation `incarnation`, if it has arrived. An update that
  // names another epoch or incarnation (written for a batch of an earlier
  // server) is rejected.
  Result Consume(uint64_t batch_number, uint64_t epoch, uint64_t incarnation);

 private:
  const protocol::LayoutConfig config_;
  // True when `record` names entry k of the staged batch `entries`, or any
  // other entry of it.
  static bool NamesAnEntry(const protocol::PriorityRecord& record, uint32_t k,
                           absl::Span<const protocol::BatchEntry> entries);
  // The staged batch `batch_number`'s entries (empty when its slot holds
  // another batch).
  absl::Span<const protocol::BatchEntry> StagedEntries(uint64_t batch_number) const;

  const uint8_t* const mailbox_;
  const uint8_t* const staging_;
  const float max_priority_;
  replay::ReplayMemory* const memory_;
  ReplayCounters* const counters_;
  std::vector<uint8_t> entry_;  // private copy of one entry
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_PRIORITY_UPDATES_H_
