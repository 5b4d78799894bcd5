// Copyright dreplay authors.
//
// staging.h: the staging ring, where the server stages pre-sampled batches for
// the learner to READ, and the commit line that ends a staging slot.
//
// Part of the replay service's wire contract (protocol/README.md): shared by
// the server and its clients through RDMA-registered memory. Nothing here
// depends on verbs/. All integers are little-endian; floats are IEEE 754.

#ifndef DREPLAY_PROTOCOL_STAGING_H_
#define DREPLAY_PROTOCOL_STAGING_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "protocol/config.h"

namespace dreplay::protocol {

// ---------------------------------------------------------------------------
// Staging ring: staging_depth staging slots of StagingSlotStride() bytes.
//
//   [0, 64)                            BatchHeader
//   [64, StagingPayloadsOffset)        StagingEntryCapacity BatchEntry slots
//                                      (16 B each): count transitions,
//                                      then record_count frame records
//   [StagingPayloadsOffset, ...)       up to StagingEntryCapacity copied
//                                      slots of slot_size B, packed: one per
//                                      entry that carries its payload
//   [StagingCommitOffset, +64)         CommitLine: BatchCommitValue(n) and
//                                      used_bytes, last
//
// An entry whose slot the learner already holds (transfer-once learner
// cache, see Hello::learner_cache) carries no payload: its slot_index has
// kEntryCachedBit set. The other entries' slots follow each other from
// StagingPayloadsOffset in entry order, so a batch uses only
// [0, StagingPayloadsOffset + payload_count * slot_size) of its staging slot
// (BatchHeader::used_bytes); the learner READs the commit line first and
// then just those bytes, and of the entry area only the entries the batch
// has (CommitLine::entry_bytes).
//
// Frames stored once (LayoutConfig::frame_stack D > 0, layout 15): the
// count transition entries are frame records that carry a transition
// (protocol/frame_record.h). After them come record_count entries with
// priority_alpha 0, one per other record the transitions' stacks refer to, each once per
// batch (a record that is itself one of the batch's transitions is not
// repeated); a record the learner holds (transfer-once) is not listed: the
// learner finds it in its store by the transition's own back references.
// So a batch has at most batch_size * (2D + 1) entries. Priority updates
// answer the count transitions only.

struct BatchHeader {
  // XXH3-64 (kChecksumSeed) of header bytes [8, 64), then entries [0, count),
  // then the copied slots [0, payload_count): see BatchChecksum().
  uint64_t checksum;
  uint64_t batch_number;
  uint64_t epoch;
  uint32_t count;         // transition entries in this batch (<= batch_size)
  uint32_t record_count;  // frame record entries after them (0 without frame_stack)
  uint32_t size;          // N: valid transitions in memory when sampled
  // 0: the copied slots follow the entries as they are. Otherwise the
  // payload area holds one block of packed_bytes bytes, compressed with
  // PolicyLine::link_codec, which decompresses to the payload_count copied
  // slots (and is smaller than they are).
  uint32_t packed_bytes;
  float beta;              // importance-sampling exponent used
  uint32_t payload_count;  // entries (of both kinds) that carry their copied slot
  uint64_t used_bytes;     // StagingPayloadsOffset + StagedPayloadBytes()
  uint64_t incarnation;    // ServerLine::incarnation of the server that staged it
};
static_assert(sizeof(BatchHeader) == kCacheLine, "BatchHeader is a wire structure");
static_assert(offsetof(BatchHeader, batch_number) == 8, "");
static_assert(offsetof(BatchHeader, epoch) == 16, "");
static_assert(offsetof(BatchHeader, count) == 24, "");
static_assert(offsetof(BatchHeader, size) == 32, "");
static_assert(offsetof(BatchHeader, packed_bytes) == 36, "");
static_assert(offsetof(BatchHeader, beta) == 40, "");
static_assert(offsetof(BatchHeader, payload_count) == 44, "");
static_assert(offsetof(BatchHeader, used_bytes) == 48, "");
static_assert(offsetof(BatchHeader, incarnation) == 56, "");

struct BatchEntry {
  uint64_t slot_sequence;
  // The slot's index, with kEntryCachedBit set when no copied slot is staged
  // for this entry (the learner holds (index, sequence) already).
  uint32_t slot_index;
  // A transition entry's p_i^alpha as the node sampled it (its sum-tree
  // value, > 0), from which the learner computes the importance-sampling
  // weight (StagedWeights, layout 16); 1 in a forwarding server's batches
  // (beta 0 there); 0 for frame-record entries (those after count).
  float priority_alpha;
};
static_assert(sizeof(BatchEntry) == 16, "BatchEntry is a wire structure");

// Slot indices are below kMaxCapacity = 2^31, so the top bit is free.
inline constexpr uint32_t kEntryCachedBit = 1u << 31;
static_assert(kMaxCapacity <= kEntryCachedBit, "an index never has the cached bit");
inline uint32_t EntryIndex(const BatchEntry& e) { return e.slot_index & ~kEntryCachedBit; }
inline bool EntryCached(const BatchEntry& e) { return (e.slot_index & kEntryCachedBit) != 0; }

// The last line of a staging slot or mailbox entry.
struct CommitLine {
  uint64_t commit;  // BatchCommitValue(batch_number); 0 = never
  // Staging slots: the batch's BatchHeader::used_bytes, so that a reader
  // that READs this line first knows how much of the slot to READ. Mailbox
  // entries: 0.
  uint64_t used_bytes;
  // Staging slots: the bytes of the entry area the batch's entries use,
  // (count + record_count) * sizeof(BatchEntry), so that the reader READs
  // [0, StagingEntriesOffset + entry_bytes) and not the whole area (layout
  // 15). Mailbox entries: 0.
  uint64_t entry_bytes;
  uint64_t reserved[5];
};
static_assert(sizeof(CommitLine) == kCacheLine, "");

constexpr uint64_t BatchCommitValue(uint64_t batch_number) { return batch_number + 1; }

// The most entries (transitions and frame records) a batch can have:
// batch_size, or batch_size * (2 * frame_stack + 1) with frames stored once.
inline uint32_t StagingEntryCapacity(const LayoutConfig& c) {
  return c.batch_size * (2 * c.frame_stack + 1);
}
inline uint64_t StagingEntriesOffset(const LayoutConfig&) { return sizeof(BatchHeader); }
inline uint64_t StagingPayloadsOffset(const LayoutConfig& c) {
  return StagingEntriesOffset(c) +
         RoundUp(uint64_t{StagingEntryCapacity(c)} * sizeof(BatchEntry), kCacheLine);
}
inline uint64_t StagingCommitOffset(const LayoutConfig& c) {
  return StagingPayloadsOffset(c) +
         RoundUp(uint64_t{StagingEntryCapacity(c)} * c.slot_size, kCacheLine);
}
inline uint64_t StagingSlotStride(const LayoutConfig& c) {
  return StagingCommitOffset(c) + sizeof(CommitLine);
}
inline uint64_t StagingSlotOffset(const LayoutConfig& c, uint64_t batch_number) {
  return (batch_number % c.staging_depth) * StagingSlotStride(c);
}

// The bytes of a staging slot a batch with `payload_count` copied slots
// uses: [0, StagingUsedBytes).
inline uint64_t StagingUsedBytes(const LayoutConfig& c, uint32_t payload_count) {
  return StagingPayloadsOffset(c) + uint64_t{payload_count} * c.slot_size;
}

// The bytes of the payload area a batch uses: its packed block, or its
// copied slots as they are.
inline uint64_t StagedPayloadBytes(const LayoutConfig& c, uint32_t payload_count,
                                   uint32_t packed_bytes) {
  return packed_bytes != 0 ? packed_bytes : uint64_t{payload_count} * c.slot_size;
}

// Checksum of staging slot image `staging_slot` whose header says `entries`
// entries (count + record_count) and `payload_count` copied slots; both are
// clamped to StagingEntryCapacity. Reads [0, StagingUsedBytes(payload_count))
// of the image only.
uint64_t BatchChecksum(const LayoutConfig& c, const void* staging_slot, uint32_t entries,
                       uint32_t payload_count);
// The same over `payload_bytes` bytes of the payload area (a packed block),
// clamped to the area.
uint64_t BatchChecksumBytes(const LayoutConfig& c, const void* staging_slot, uint32_t entries,
                            uint64_t payload_bytes);

// Learner side, first READ: the commit line of the staging slot of
// `batch_number`. The bytes of the slot to READ next (used_bytes) when that
// batch is committed there; Unavailable when it is not staged yet (READ
// again later); DataLoss when used_bytes or entry_bytes is impossible for
// this layout (no batch has such a value, so not a torn READ either).
absl::StatusOr<uint64_t> StagedBatchBytes(const LayoutConfig& config, const CommitLine& line,
                                          uint64_t batch_number);

// Learner side, second READ: checks an image of the first `image_bytes`
// bytes of the staging slot of `batch_number`. OK when it is batch
// `batch_number` of `epoch`, whole; Unavailable when another batch is there
// (not staged yet); DataLoss when the header is malformed, the image shorter
// than the batch's used_bytes, or the checksum fails (a READ that overlapped
// the server's write: READ again); FailedPrecondition when a whole, verified
// batch belongs to another epoch (the server restarted).
absl::Status CheckBatchImage(const LayoutConfig& config, const void* image, uint64_t image_bytes,
                             uint64_t batch_number, uint64_t epoch);

// CheckBatchImage of a whole staging slot image (StagingSlotStride bytes),
// its commit line included and checked first (Unavailable when the batch is
// not committed there).
absl::Status CheckStagedBatch(const LayoutConfig& config, const void* image, uint64_t batch_number,
                              uint64_t epoch);

// Learner side: the importance-sampling weights of a staged batch's
// transition entries (its first header.count entries, as staged) for the
// header's `beta`, into `weights` (the same size): w_i = (min_j pa_j /
// pa_i)^beta, pa being each entry's priority_alpha and the minimum taken
// over the entries whose pa is > 0 and finite. That is (N P(i))^-beta
// normalised by the batch's largest, as replay::ReplayMemory::ComputeWeights
// computes it from P(i) = pa_i / sum (the sum and N cancel), so the weights
// are in (0, 1] and the largest is 1. An entry whose pa is not > 0 and
// finite gets 1, and so does every entry when beta is not > 0 and finite
// (beta 0: no correction). REQUIRES: weights.size() == transitions.size().
void StagedWeights(absl::Span<const BatchEntry> transitions, float beta, absl::Span<float> weights);

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_STAGING_H_
