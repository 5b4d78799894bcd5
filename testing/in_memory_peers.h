// Copyright dreplay authors.
//
// in_memory_peers.h: helpers for replay_server tests that play the actors' and the
// learner's parts on plain memory, with the same word-wise atomic accesses as
// a NIC-emulating thread would need (see common/shared_words.h).

#ifndef DREPLAY_TESTING_IN_MEMORY_PEERS_H_
#define DREPLAY_TESTING_IN_MEMORY_PEERS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "protocol/layout.h"
#include "replay_server/regions.h"

namespace dreplay::testing {

// capacity 64, slot_size 168 (128-byte payloads), batch 8, depth 2.
protocol::LayoutConfig SmallConfig();

// A deterministic payload for `sequence`, `length` bytes.
std::vector<uint8_t> PayloadFor(uint64_t sequence, uint32_t length);

// The ring index of `sequence` of lease 0.
inline uint64_t SlotOf(const protocol::LayoutConfig& c, uint64_t sequence) {
  return protocol::LeaseSlotIndex(c, 0, sequence);
}

// The functions below play the actor of one lease (lease 0 unless named);
// sequences are that lease's (protocol/leases.h).

// Seals sequence `sequence` into its slot (word-wise atomic stores), without
// committing it. `insert_time_ns`: SlotHeader::insert_time_ns (0: unknown).
void WriteSlot(const server::ReplayRegions& regions, uint64_t sequence, float priority,
               uint32_t payload_length, uint32_t actor_id = 0, uint64_t insert_time_ns = 0);
void WriteLeaseSlot(const server::ReplayRegions& regions, uint32_t lease, uint64_t sequence,
                    float priority, uint32_t payload_length = 128);
// Seals `payload` (instead of PayloadFor's bytes) into the slot of
// `sequence` of `lease`, without committing it.
void WriteLeaseSlotPayload(const server::ReplayRegions& regions, uint32_t lease, uint64_t sequence,
                           float priority, absl::Span<const uint8_t> payload);
// Release-stores the commit word of `sequence`.
void Commit(const server::ReplayRegions& regions, uint64_t sequence);
void CommitLease(const server::ReplayRegions& regions, uint32_t lease, uint64_t sequence);
// Takes the next `count` sequences of the lease, as its actor numbers them,
// and marks their slots as being written (the header's sequence word), so
// the next call continues after them; returns the first. The next sequence
// is found from the memory: the first at or after the lease's published
// ingest cursor whose slot does not name it.
uint64_t Reserve(const server::ReplayRegions& regions, uint64_t count);
uint64_t ReserveLease(const server::ReplayRegions& regions, uint32_t lease, uint64_t count);
// Reserve(1) + WriteSlot + Commit: a well-behaved actor's insert.
uint64_t Insert(const server::ReplayRegions& regions, float priority,
                uint32_t payload_length = 128);
uint64_t InsertLease(const server::ReplayRegions& regions, uint32_t lease, float priority,
                     uint32_t payload_length = 128);

// Copies the staging slot of `batch_number` out (word-wise atomic loads).
std::vector<uint8_t> ReadStagingSlot(const server::ReplayRegions& regions, uint64_t batch_number);
// Writes a priority update for `batch_number` of `epoch` and `incarnation`
// into the mailbox: the entry, then the commit line with a release store.
void WriteUpdate(const server::ReplayRegions& regions, uint64_t batch_number, uint64_t epoch,
                 uint64_t incarnation, absl::Span<const protocol::PriorityRecord> records);
// The same with the incarnation the control block's ServerLine publishes (as
// a learner echoes it from the staged batch).
void WriteUpdate(const server::ReplayRegions& regions, uint64_t batch_number, uint64_t epoch,
                 absl::Span<const protocol::PriorityRecord> records);

}  // namespace dreplay::testing

#endif  // DREPLAY_TESTING_IN_MEMORY_PEERS_H_
