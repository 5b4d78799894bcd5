// Copyright dreplay authors.
//
// checkpoint.h: saving and restoring the replay memory to a file, without
// stopping the replay core.
//
// A checkpoint is taken in two parts:
//
//   1. The cut (ReplayCore::BeginCheckpoint / ContinueCheckpoint, on the
//      core's thread, in bounded steps between its normal work:
//      incremental_cut.h): a copy of the small metadata only. At once, the
//      O(leases) part: every lease's ingest cursor and holder (actor id,
//      grants), the counters, epoch, incarnation and journal end; then, a
//      chunk per step, every index's stored priority and sequence (16 bytes
//      per slot). The sequences are the memory's at the cut's begin (an
//      entry about to change before its chunk is copied is saved first);
//      the priorities are from the moment each entry was copied. The
//      longest step is CheckpointCut::pause.
//   2. The write (WriteCheckpoint, on any thread, e.g. CheckpointWriter's)
//      streams the slot ring to the file while actors keep writing and the
//      core keeps ingesting and sampling. Each slot is copied out word by
//      word after an acquire load of its commit word, and the copy is
//      checked against the cut: it is kept when the commit word and the
//      copy's header and checksum show the sequence the cut holds at that
//      index, or the lease's committed-but-not-ingested sequence at that
//      position (in [cursor, cursor + L)); otherwise the slot was
//      overwritten during the write (or is being written): the file records
//      it empty (zero bytes, no commit, no sequence, value 0) and the cut's
//      entry is counted in CheckpointWriteStats::slots_absent. The file
//      never holds a mixed slot. The commit words in the file are derived
//      from what was kept, not copied. The params region's published half is
//      copied when its version and checksum agree (the reader's protocol,
//      protocol/params.h), retried a few times.
//
// A checkpoint holds, under a header (magic, format version, LayoutConfig,
// alpha, epsilon, sampling mode, the cut's scalars) and a trailer (XXH3-64
// of the header followed by the XXH3-64 of the sections): the slot ring, the commit words, every
// index's stored priority (as of its chunk's copy in the cut) and sequence (as of the cut's begin),
// every lease's cursor, every lease's holder, and the params region's header and published half.
//
// WriteCheckpoint is atomic: it writes "<path>.tmp" (mode 0600), fsyncs it, renames it to
// `path` and fsyncs the directory, so `path` is always either the old
// checkpoint or the new one.
//
// ReadCheckpoint validates before it trusts: magic (DataLoss), format version
// (FailedPrecondition naming both versions: files of version 4 and older
// are refused), the config against the regions' config and the priority
// settings against the memory's (FailedPrecondition naming the first
// difference, e.g. "batch_size: 32 vs 64"), section sizes and file length
// (DataLoss), the trailer checksum (DataLoss), then what a checksum cannot
// vouch for (DataLoss naming the first inconsistency): every stored sequence
// at its lease's position and below its lease's cursor, the lease cursors
// adding up to the ingest cursor, every lease holder a state the lease table
// takes (never held: no actor, no grants; held or released: granted, one
// lease per actor). Then, in each lease, the
// commit words after the verified prefix that starts at its saved cursor are
// cleared (a committed sequence after a gap: the reconnecting actor resumes
// at the gap and writes it again). Then every index the memory says is valid
// is checked against its commit word, sequence and checksum; those that fail
// are removed and counted in counters.restore_dropped (none for a file this
// build wrote: it keeps only slots that verify). The params half is loaded
// into the params region (an actor that connects gets those parameters at
// once). On any error the slot ring, commit words, params region and memory
// are left empty.
//
// The signal handling and periodic timing of checkpoints belong to the
// server (server_checkpoints.h); ReplayCore's BeginCheckpoint /
// ContinueCheckpoint / CutCheckpoint / SaveCheckpoint / RestoreCheckpoint
// wrap these.
//
// Thread safety: the cut on the thread that owns the memory; then
// WriteCheckpoint on any one thread while peers and the core go on (it
// reads the regions with word-wise atomic loads and touches only the cut);
// it also writes the cut's verification log records, which may be written
// from any thread).
// ReadCheckpoint must run before any peer uses the regions, on the memory's
// owner.

#ifndef DREPLAY_REPLAY_SERVER_CHECKPOINT_CHECKPOINT_H_
#define DREPLAY_REPLAY_SERVER_CHECKPOINT_CHECKPOINT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/verification_log.h"
#include "protocol/layout.h"
#include "replay/replay_memory.h"
#include "replay_server/checkpoint/file_system.h"
#include "replay_server/counters.h"
#include "replay_server/regions.h"

namespace dreplay::server {

// ASCII "DRPCKPT1" read as a little-endian u64.
inline constexpr uint64_t kCheckpointMagic = 0x3154504B43505244ULL;
// Version 5: written from a cut while the core runs (slots that changed
// during the write are recorded empty), with every lease's holder and the
// params region. Version 4 files (the core stopped for the whole write; no
// lease holders, no params) and older are refused (FailedPrecondition).
inline constexpr uint32_t kCheckpointVersion = 5;

// A lease's holder as the lease line published it (protocol/leases.h).
struct CheckpointLeaseHolder {
  uint32_t state = 0;  // protocol::LeaseState
  uint32_t actor_id = 0;
  uint64_t grants = 0;
};
static_assert(sizeof(CheckpointLeaseHolder) == 16, "CheckpointLeaseHolder is a file format");

// The state saved beside the regions and the memory.
struct CheckpointState {
  uint64_t epoch = 0;                                // the epoch that wrote the checkpoint
  uint64_t incarnation = 0;                          // the incarnation that wrote it (0: unknown)
  uint64_t ingest_cursor = 0;                        // sequences handled, over all leases
  uint64_t journal_end = 0;                          // forward journal entries written
  std::vector<uint64_t> lease_cursors;               // one per lease
  std::vector<CheckpointLeaseHolder> lease_holders;  // one per lease
  ReplayCounters counters;
};

// What the core copies at the cut (see the file comment).
struct CheckpointCut {
  CheckpointState state;
  std::vector<double> values;       // stored priority (p^alpha) per index
  std::vector<uint64_t> sequences;  // sequence per index (ReplayMemory::kNoSequence: none)
  replay::ReplayMemoryOptions memory_options;  // alpha, epsilon, mode: the file's header
  absl::Duration pause;                        // the longest step of the cut on the core's thread
  uint32_t steps = 0;                          // the cut's steps (its begin and its chunks)
  absl::Duration cut_time;                     // from the cut's begin to its last chunk
  // For the verification log (common/verification_log.h): the cut's id and
  // the log, not owned; when `log` is set, WriteCheckpoint writes a D record
  // per entry found overwritten and, once the file is in place, the C record.
  uint64_t cut_id = 0;
  VerificationLog* log = nullptr;
};

// What a write did.
struct CheckpointWriteStats {
  absl::Duration cut_pause;  // CheckpointCut::pause
  uint32_t cut_steps = 0;    // CheckpointCut::steps
  absl::Duration cut_time;   // CheckpointCut::cut_time
  uint64_t cut_id = 0;       // CheckpointCut::cut_id
  uint64_t cut_ingest_cursor = 0;
  uint64_t bytes = 0;           // file size
  absl::Duration write_time;    // open to the directory fsync
  uint64_t slots_kept = 0;      // entries of the cut written
  uint64_t slots_absent = 0;    // entries of the cut overwritten before they were written
  uint64_t pending_kept = 0;    // committed, not ingested at the cut, written
  uint64_t records_kept = 0;    // frames stored once: the leases' last-lap records, written
  uint64_t params_version = 0;  // 0: none published, or none caught whole
  // Bytes per second of write_time.
  double bytes_per_second() const;
  // One line for the log.
  std::string Summary() const;
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
  uint64_t lease_holder_bytes;  // leases * 16: CheckpointLeaseHolder
  uint64_t params_bytes;        // 64 + ParamsHalfStride: ParamsHeader, then the active half
  uint64_t slots_absent;        // CheckpointWriteStats::slots_absent
  uint64_t reserved[5];
};
static_assert(sizeof(CheckpointHeader) == 480, "CheckpointHeader is a file format");
static_assert(offsetof(CheckpointHeader, config) == 16, "");
static_assert(offsetof(CheckpointHeader, counters) == 184, "");
static_assert(offsetof(CheckpointHeader, slot_bytes) == 368, "");
static_assert(offsetof(CheckpointHeader, lease_cursor_bytes) == 408, "");
static_assert(offsetof(CheckpointHeader, params_bytes) == 424, "");

// Writes a checkpoint of `cut` and the slots `regions` holds now to `path`.
// `cut` is modified: entries found overwritten are made empty. Internal
// (I/O) errors carry the path and errno text; InvalidArgument when the cut
// does not fit the regions.
// `fs`: the file system (file_system.h; null: the process's POSIX one).
absl::StatusOr<CheckpointWriteStats> WriteCheckpoint(const std::string& path,
                                                     const ReplayRegions& regions,
                                                     CheckpointCut* cut, FileSystem* fs = nullptr);

// Loads the checkpoint at `path` into `regions`, `memory` and `state`. See
// the file comment for the status codes. NotFound if there is no file.
absl::Status ReadCheckpoint(const std::string& path, ReplayRegions* regions,
                            replay::ReplayMemory* memory, CheckpointState* state,
                            FileSystem* fs = nullptr);

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_CHECKPOINT_CHECKPOINT_H_
