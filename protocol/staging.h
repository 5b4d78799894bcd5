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
#include "protocol/config.h"

namespace dreplay::protocol {

// ---------------------------------------------------------------------------
// Staging ring: staging_depth staging slots of StagingSlotStride() bytes.
//
//   [0, 64)                            BatchHeader
//   [64, StagingPayloadsOffset)        batch_size BatchEntry (16 B each)
//   [StagingPayloadsOffset, ...)       batch_size copied slots of slot_size B
//   [StagingCommitOffset, +64)         CommitLine: BatchCommitValue(n), last

struct BatchHeader {
  // XXH3-64 (kChecksumSeed) of header bytes [8, 64), then entries [0, count),
  // then the copied slots [0, count): see BatchChecksum().
  uint64_t checksum;
  uint64_t batch_number;
  uint64_t epoch;
  uint32_t count;      // entries in this batch (<= batch_size)
  uint32_t slot_size;  // stride of the copied slots (== config.slot_size)
  uint64_t size;       // N: valid transitions in memory when sampled
  float beta;          // importance-sampling exponent used
  uint32_t reserved0;
  uint64_t reserved[2];
};
static_assert(sizeof(BatchHeader) == kCacheLine, "BatchHeader is a wire structure");
static_assert(offsetof(BatchHeader, batch_number) == 8, "");
static_assert(offsetof(BatchHeader, epoch) == 16, "");
static_assert(offsetof(BatchHeader, count) == 24, "");
static_assert(offsetof(BatchHeader, size) == 32, "");
static_assert(offsetof(BatchHeader, beta) == 40, "");

struct BatchEntry {
  uint64_t slot_sequence;
  uint32_t slot_index;
  float weight;  // importance-sampling weight, (N * P(i))^-beta / max
};
static_assert(sizeof(BatchEntry) == 16, "BatchEntry is a wire structure");

// The last line of a staging slot or mailbox entry.
struct CommitLine {
  uint64_t commit;  // BatchCommitValue(batch_number); 0 = never
  uint64_t reserved[7];
};
static_assert(sizeof(CommitLine) == kCacheLine, "");

constexpr uint64_t BatchCommitValue(uint64_t batch_number) { return batch_number + 1; }

inline uint64_t StagingEntriesOffset(const LayoutConfig&) { return sizeof(BatchHeader); }
inline uint64_t StagingPayloadsOffset(const LayoutConfig& c) {
  return StagingEntriesOffset(c) + RoundUp(uint64_t{c.batch_size} * sizeof(BatchEntry), kCacheLine);
}
inline uint64_t StagingCommitOffset(const LayoutConfig& c) {
  return StagingPayloadsOffset(c) + RoundUp(uint64_t{c.batch_size} * c.slot_size, kCacheLine);
}
inline uint64_t StagingSlotStride(const LayoutConfig& c) {
  return StagingCommitOffset(c) + sizeof(CommitLine);
}
inline uint64_t StagingSlotOffset(const LayoutConfig& c, uint64_t batch_number) {
  return (batch_number % c.staging_depth) * StagingSlotStride(c);
}

// Checksum of staging slot image `staging_slot` (StagingSlotStride bytes)
// whose header says `count` entries; count is clamped to batch_size.
uint64_t BatchChecksum(const LayoutConfig& c, const void* staging_slot, uint32_t count);

// Learner side: checks a READ image of the staging slot of `batch_number`
// (StagingSlotStride bytes). OK when it is batch `batch_number` of `epoch`,
// whole; Unavailable when that batch is not staged there yet (READ again
// later); DataLoss when the header is malformed or the checksum fails (a READ
// that overlapped the server's write: READ again); FailedPrecondition when a
// whole, verified batch belongs to another epoch (the server restarted).
absl::Status CheckStagedBatch(const LayoutConfig& config, const void* image, uint64_t batch_number,
                              uint64_t epoch);

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_STAGING_H_
