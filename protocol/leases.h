// Copyright dreplay authors.
//
// leases.h: actor leases (each actor's own range of the slot ring, with its
// own sequence numbers, commit words and published ingest cursor) and the
// forward journal (the runs ingest handled, in order, for the learner
// placement).
//
// Part of the replay service's wire contract (protocol/README.md): shared by
// the server and its clients through RDMA-registered memory. Nothing here
// depends on verbs/. All integers are little-endian; floats are IEEE 754.
//
// Static split: lease i owns ring slots [i * L, (i + 1) * L) with
// L = LeaseSlots(config) = capacity / leases, and the commit words of those
// slots. Its actor numbers its transitions 0, 1, 2, ... (per lease, no
// atomics); sequence q of lease i lives in ring slot LeaseSlotIndex(c, i, q)
// = i * L + q % L. The sampler's index space is the whole ring.

#ifndef DREPLAY_PROTOCOL_LEASES_H_
#define DREPLAY_PROTOCOL_LEASES_H_

#include <cstddef>
#include <cstdint>

#include "protocol/config.h"

namespace dreplay::protocol {

// Slots per lease.
inline uint64_t LeaseSlots(const LayoutConfig& c) { return c.capacity / c.leases; }
// The first ring index of lease `lease`.
inline uint64_t LeaseBase(const LayoutConfig& c, uint32_t lease) {
  return uint64_t{lease} * LeaseSlots(c);
}
// The ring index of sequence `sequence` of lease `lease`.
inline uint64_t LeaseSlotIndex(const LayoutConfig& c, uint32_t lease, uint64_t sequence) {
  return LeaseBase(c, lease) + sequence % LeaseSlots(c);
}

// Sequences an actor may run ahead of its lease's ingest cursor: the
// config's actor_window, at most (and by default, 0) the whole lease.
inline uint64_t ActorWindow(const LayoutConfig& c) {
  const uint64_t lease = LeaseSlots(c);
  return c.actor_window != 0 && c.actor_window < lease ? c.actor_window : lease;
}
// True when an actor may write `sequence` of its lease now that the server
// published the lease's `ingest_cursor`: it never laps a slot ingest has not
// handled.
inline bool SequenceWritable(const LayoutConfig& c, uint64_t sequence, uint64_t ingest_cursor) {
  return sequence < ingest_cursor + ActorWindow(c);
}

// LeaseLine::state values.
enum class LeaseState : uint32_t {
  kNeverHeld = 0,  // no actor has held it in this process
  kHeld = 1,       // held by a connected actor (holder_actor_id)
  kReleased = 2,   // its actor disconnected; it gets the lease back
};

// One per lease, in the leases region (READ by every role). The replay core
// writes the ingest words, the connection handling the holder words; both
// with release stores, each on the line's own words. A reader takes the
// line word by word (it is informational except ingest_cursor, which is
// monotonic).
struct alignas(kCacheLine) LeaseLine {
  // Every sequence of the lease below this is handled by ingest (inserted,
  // torn or overrun); its actor may write q only when SequenceWritable.
  uint64_t ingest_cursor = 0;
  uint64_t inserted = 0;  // of this lease
  uint64_t torn = 0;      // committed, failed its checks (nothing inserted)
  uint64_t overrun = 0;   // lapped before ingest
  // Initial priorities clamped (above max_priority) or replaced (NaN,
  // infinite, negative) by ingest.
  uint64_t priorities_bounded = 0;
  uint32_t state = 0;            // LeaseState
  uint32_t holder_actor_id = 0;  // the actor that holds or last held it
  uint64_t grants = 0;           // handshakes that granted it
  // Committed, verified, but failed the transition check (layout 9;
  // transition_check.h): dropped, nothing inserted.
  uint64_t transitions_invalid = 0;
};
static_assert(sizeof(LeaseLine) == kCacheLine, "LeaseLine is a wire structure");
static_assert(offsetof(LeaseLine, ingest_cursor) == 0, "");
static_assert(offsetof(LeaseLine, state) == 40, "");
static_assert(offsetof(LeaseLine, grants) == 48, "");
static_assert(offsetof(LeaseLine, transitions_invalid) == 56, "");

inline uint64_t LeaseLineOffset(uint32_t lease) { return uint64_t{lease} * sizeof(LeaseLine); }

// ---------------------------------------------------------------------------
// Forward journal: a ring of kJournalEntries entries after the lease lines
// in the leases region. Ingest appends one entry per run of sequences it
// handled in one lease in one step (not crossing the lease's wrap), then
// publishes ServerLine::journal_end. The learner placement READs the entries
// and then the slots and commit words they name, one READ each per run.

inline constexpr uint64_t kJournalEntries = 4096;

struct JournalEntry {
  uint64_t number;          // the entry's position in the journal: 0, 1, ...
  uint64_t first_sequence;  // of the lease
  uint32_t lease;
  uint32_t count;  // sequences first_sequence .. first_sequence + count - 1
  uint64_t reserved;
};
static_assert(sizeof(JournalEntry) == 32, "JournalEntry is a wire structure");
static_assert(offsetof(JournalEntry, first_sequence) == 8, "");
static_assert(offsetof(JournalEntry, lease) == 16, "");

// Byte offset of the journal in the leases region.
inline uint64_t JournalOffset(const LayoutConfig& c) {
  return uint64_t{c.leases} * sizeof(LeaseLine);
}
inline uint64_t JournalEntryOffset(const LayoutConfig& c, uint64_t number) {
  return JournalOffset(c) + (number % kJournalEntries) * sizeof(JournalEntry);
}
// The leases region: the lease lines, then the journal.
inline uint64_t LeasesRegionBytes(const LayoutConfig& c) {
  return JournalOffset(c) + kJournalEntries * sizeof(JournalEntry);
}

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_LEASES_H_
