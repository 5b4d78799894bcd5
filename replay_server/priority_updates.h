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
// invalid. An entry that fails its checks is counted as a mailbox reject and
// still consumed: the learner believes it answered, so waiting for another
// answer would stall sampling forever.
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

  // `mailbox` (MailboxBytes(config)), `memory` and `counters` are not owned
  // and must outlive this object. REQUIRES: config.Validate() is OK.
  PriorityUpdates(const protocol::LayoutConfig& config, const uint8_t* mailbox,
                  replay::ReplayMemory* memory, ReplayCounters* counters);

  // Consumes the update for batch `batch_number` of epoch `epoch`, staged
  // by server incarnation `incarnation`, if it has arrived. An update that
  // names another epoch or incarnation (written for a batch of an earlier
  // server) is rejected.
  Result Consume(uint64_t batch_number, uint64_t epoch, uint64_t incarnation);

 private:
  const protocol::LayoutConfig config_;
  const uint8_t* const mailbox_;
  replay::ReplayMemory* const memory_;
  ReplayCounters* const counters_;
  std::vector<uint8_t> entry_;  // private copy of one entry
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_PRIORITY_UPDATES_H_
