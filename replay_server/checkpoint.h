// Copyright dreplay authors.
//
// checkpoint.h: saving and restoring the replay memory to a file.
//
// A checkpoint holds the slot ring, the commit words, every index's stored
// priority and sequence, the counters, the epoch, the ingest cursor of
// every lease and the forward journal's end, under a header (magic, format version, LayoutConfig,
// alpha, epsilon, sampling mode) and an XXH3-64 trailer over everything before it.
//
// WriteCheckpoint is atomic: it writes "<path>.tmp", fsyncs it, renames it to
// `path` and fsyncs the directory, so `path` is always either the old
// checkpoint or the new one. Slots and commit words are read with word-wise
// atomic loads while actors may be writing them; a slot caught mid-write is
// consistent in the file but fails its check on restore and is dropped there.
//
// ReadCheckpoint validates before it trusts: magic (DataLoss), format version
// (FailedPrecondition), the config against the regions' config and the
// priority settings against the memory's (FailedPrecondition naming the
// first difference, e.g. "batch_size: 32 vs 64"), section sizes and file
// length (DataLoss), the trailer checksum (DataLoss). Then, in each lease,
// the commit words after the verified prefix that starts at its saved
// cursor are cleared: those were caught while their actor wrote them, and
// the reconnecting actor resumes at the first uncommitted sequence (the
// server's handshake), so they are written again. Then
// every index the memory says is valid is checked against its commit word,
// sequence and checksum; those that fail are removed and counted in
// counters.restore_dropped. On any error the slot ring, commit words and
// memory are left empty.
//
// The signal handling and periodic timing of checkpoints belong to the server
// binary; ReplayCore::SaveCheckpoint / RestoreCheckpoint wrap these.
//
// Thread safety: the caller must be the only user of `memory` (the replay
// core's thread); ReadCheckpoint must run before any peer uses the regions.

#ifndef DREPLAY_REPLAY_SERVER_CHECKPOINT_H_
#define DREPLAY_REPLAY_SERVER_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "protocol/layout.h"
#include "replay/replay_memory.h"
#include "replay_server/counters.h"
#include "replay_server/regions.h"

namespace dreplay::server {

// ASCII "DRPCKPT1" read as a little-endian u64.
inline constexpr uint64_t kCheckpointMagic = 0x3154504B43505244ULL;
// Version 4 (actor leases, layout version 4) saves every lease's cursor and
// the forward journal's end; older files hold a layout this build does not
// speak and are refused (FailedPrecondition).
inline constexpr uint32_t kCheckpointVersion = 4;

// The state saved beside the regions and the memory.
struct CheckpointState {
  uint64_t epoch = 0;                   // the epoch that wrote the checkpoint
  uint64_t incarnation = 0;             // the incarnation that wrote it (0: unknown)
  uint64_t ingest_cursor = 0;           // sequences handled, over all leases
  uint64_t journal_end = 0;             // forward journal entries written
  std::vector<uint64_t> lease_cursors;  // one per lease
  ReplayCounters counters;
};

// The fixed header at the start of a checkpoint file.
struct CheckpointHeader {
  uint64_t magic;
  uint32_t format_version;
  uint32_t header_bytes;  // sizeof(CheckpointHeader)
  protocol::LayoutConfig config;
  double alpha;
  double priority_epsilon;
  uint32_t sampling_mode;
  uint32_t reserved0;
  uint64_t epoch;
  uint64_t journal_end;
  uint64_t ingest_cursor;
  uint64_t counters[kNumReplayCounters];  // ReplayCounters' fields
  // Section lengths, in file order.
  uint64_t slot_bytes;          // capacity * slot_size
  uint64_t commit_bytes;        // capacity * 8
  uint64_t value_bytes;         // capacity * 8: stored priorities (double)
  uint64_t sequence_bytes;      // capacity * 8: sequences (kNoSequence = empty)
  uint64_t incarnation;         // the writer's incarnation
  uint64_t lease_cursor_bytes;  // leases * 8: each lease's ingest cursor
};
static_assert(sizeof(CheckpointHeader) == 416, "CheckpointHeader is a file format");
static_assert(offsetof(CheckpointHeader, config) == 16, "");
static_assert(offsetof(CheckpointHeader, counters) == 184, "");
static_assert(offsetof(CheckpointHeader, slot_bytes) == 368, "");
static_assert(offsetof(CheckpointHeader, lease_cursor_bytes) == 408, "");

// Writes a checkpoint of `regions` (slot ring, commit words), `memory` and
// `state` to `path`. Internal (I/O) errors carry the path and errno text.
absl::Status WriteCheckpoint(const std::string& path, const ReplayRegions& regions,
                             const replay::ReplayMemory& memory, const CheckpointState& state);

// Loads the checkpoint at `path` into `regions`, `memory` and `state`. See
// the file comment for the status codes. NotFound if there is no file.
absl::Status ReadCheckpoint(const std::string& path, ReplayRegions* regions,
                            replay::ReplayMemory* memory, CheckpointState* state);

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_CHECKPOINT_H_
