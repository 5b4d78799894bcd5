// Copyright dreplay authors.
//
// mailbox.h: the priority mailbox, where the learner WRITEs the new priorities
// of each batch it trained on.
//
// Part of the replay service's wire contract (protocol/README.md): shared by
// the server and its clients through RDMA-registered memory. Nothing here
// depends on verbs/. All integers are little-endian; floats are IEEE 754.

#ifndef DREPLAY_PROTOCOL_MAILBOX_H_
#define DREPLAY_PROTOCOL_MAILBOX_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "protocol/config.h"
#include "protocol/staging.h"

namespace dreplay::protocol {

// ---------------------------------------------------------------------------
// Priority mailbox: staging_depth entries of MailboxEntryStride() bytes.
//
//   [0, 64)                          MailboxHeader
//   [64, MailboxCommitOffset)        batch_size PriorityRecord (16 B each)
//   [MailboxCommitOffset, +64)       CommitLine: BatchCommitValue(n), last

struct MailboxHeader {
  // XXH3-64 (kChecksumSeed) of bytes [8, 64 + count * 16) of the entry.
  uint64_t checksum;
  uint64_t batch_number;
  uint64_t epoch;  // the epoch of the batch being answered
  uint32_t count;  // records (<= batch_size)
  uint32_t reserved0;
  // The incarnation of the batch being answered (BatchHeader::incarnation):
  // an update written for a batch of a server that has since restarted is
  // rejected, even when the epoch number repeats.
  uint64_t incarnation;
  uint64_t reserved[3];
};
static_assert(sizeof(MailboxHeader) == kCacheLine, "MailboxHeader is a wire structure");
static_assert(offsetof(MailboxHeader, batch_number) == 8, "");
static_assert(offsetof(MailboxHeader, epoch) == 16, "");
static_assert(offsetof(MailboxHeader, count) == 24, "");
static_assert(offsetof(MailboxHeader, incarnation) == 32, "");

struct PriorityRecord {
  uint64_t slot_sequence;
  uint32_t slot_index;
  float priority;  // raw new priority (e.g. |TD error|), >= 0 and finite
};
static_assert(sizeof(PriorityRecord) == 16, "PriorityRecord is a wire structure");

inline uint64_t MailboxRecordsOffset(const LayoutConfig&) { return sizeof(MailboxHeader); }
inline uint64_t MailboxCommitOffset(const LayoutConfig& c) {
  return MailboxRecordsOffset(c) +
         RoundUp(uint64_t{c.batch_size} * sizeof(PriorityRecord), kCacheLine);
}
inline uint64_t MailboxEntryStride(const LayoutConfig& c) {
  return MailboxCommitOffset(c) + sizeof(CommitLine);
}
inline uint64_t MailboxEntryOffset(const LayoutConfig& c, uint64_t batch_number) {
  return (batch_number % c.staging_depth) * MailboxEntryStride(c);
}

// Checksum of a mailbox entry image with `count` records (clamped to
// batch_size).
uint64_t MailboxChecksum(const LayoutConfig& c, const void* entry, uint32_t count);

// Learner side: fills `entry` (MailboxEntryStride(config) bytes) with the
// update for batch `batch_number` of `epoch` and `incarnation` (both from the
// batch's header): header, records, checksum and
// the commit line. WRITE bytes [0, MailboxCommitOffset) of it to the entry,
// then the commit line with a second WRITE on the same queue pair.
// InvalidArgument if there are more records than batch_size or `entry` is
// too small.
absl::Status EncodePriorityUpdate(const LayoutConfig& config, uint64_t batch_number, uint64_t epoch,
                                  uint64_t incarnation, absl::Span<const PriorityRecord> records,
                                  absl::Span<uint8_t> entry);

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_MAILBOX_H_
