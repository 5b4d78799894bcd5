// Copyright dreplay authors.
//
// layout.h: the wire contract of the replay service.
//
// Every structure that the server and its clients (actors, learner, monitor)
// share through RDMA-registered memory is defined here, with static_asserts on
// its size, alignment and field offsets. Nothing here depends on verbs/: the
// regions are plain memory buffers; the server registers them, clients address
// them through the RemoteRegion entries of a RegionDirectory.
//
// All integers are little-endian (static_assert below); floats are IEEE 754.
// Structures shared by several writers keep each writer's words on their own
// 64-byte cache line.
//
// Regions (one buffer each; sizes from the Region*Bytes() helpers):
//
//   control block     ControlBlock: magic, layout version, LayoutConfig
//                     (written once before registration), `tail` (actors'
//                     reservation counter, changed only by remote FETCH_ADD),
//                     server-published words (ingest_cursor, epoch, ...).
//   slot ring         `capacity` slots of `slot_size` bytes: SlotHeader, then
//                     the encoded transition (the payload).
//   commit words      `capacity` u64, one per slot: CommitValue(sequence).
//   staging ring      `staging_depth` staged batches (StagingSlot*Offset()).
//   priority mailbox  `staging_depth` entries written by the learner.
//   params region     ParamsHeader + two halves (double buffer).
//   stats region      StatsBlock, READ by monitors.
//
// Access a role needs (the server registers one buffer several times where
// two roles need different rights; the tail line is registered on its own so
// that atomic rights never cover the configuration):
//
//   region            actor          learner             monitor
//   control block     READ           READ                READ
//   tail line         FETCH_ADD      -                   -
//   slot ring         WRITE          READ (baseline)     -
//   commit words      WRITE          READ (baseline)     -
//   staging ring      -              READ                -
//   priority mailbox  -              WRITE               -
//   params region     READ           READ, WRITE         -
//   stats region      -              -                   READ
//   actors region     WRITE own line READ                READ
//
// ---------------------------------------------------------------------------
// Protocols
//
// Actor insert of k transitions:
//   1. s = FETCH_ADD(tail, k): the actor owns sequences s .. s+k-1; sequence q
//      lives in slot SlotIndex(q) = q & (capacity - 1).
//   2. Before writing sequence q the actor makes sure SequenceWritable(config,
//      q, ingest_cursor), i.e. q < ingest_cursor + ActorWindow(config) (it
//      READs the control block's ServerLine now and then and backs off). So
//      it never laps a slot the server has not ingested, and at most
//      ActorWindow slots are in flux (written, not yet ingested) at a time:
//      however fast actors are, the memory keeps capacity - window valid
//      transitions for the sampler.
//   3. WRITE the k slots (SealSlot() fills header and checksum; contiguous
//      except at the wrap), then WRITE their commit words (CommitValue(q)) on
//      the same queue pair. RC places the second WRITE after the first, so a
//      commit is never visible before its slot.
//
// Server ingest: walks sequences in order from ingest_cursor; accepts q only
// when commit word == CommitValue(q), header.sequence == q and the checksum
// verifies; a reserved sequence never committed within a timeout is counted
// abandoned, a sequence overwritten by a later one is counted overrun. The
// server then publishes ingest_cursor = first sequence not yet handled.
//
// Batch n (numbers start at 0 in each epoch) is staged in staging slot
// n % staging_depth: the server writes BatchHeader, the entries and the copied
// slots (whole slots, header included), then the batch's commit line
// (BatchCommitValue(n)) last. The learner READs the whole staging slot (one
// large READ), and accepts it when commit == BatchCommitValue(n), header
// batch_number == n, header epoch == the epoch it knows, and BatchChecksum()
// verifies; otherwise it READs again later. Placement within one READ is not
// ordered, so the checksum (not the commit word alone) is the guard.
//
// Priority update for batch n: the learner WRITEs MailboxHeader + records into
// mailbox entry n % staging_depth, then (second WRITE, same queue pair) the
// entry's commit line = BatchCommitValue(n). The server reuses staging slot
// n % depth for batch n + depth only after it has consumed that update, so the
// mailbox is the flow control. Records whose slot no longer holds the given
// sequence are dropped (stale).
//
// Parameters: the learner publishes version v (v = 1, 2, ...) by WRITEing half
// ParamsHalfOf(v) (ParamsHalfHeader + data), then WRITEing ParamsHeader
// {version v, active_half}. A reader READs ParamsHeader, READs the active
// half, and accepts it when the half's version equals the header's and
// ParamsChecksum() verifies; otherwise it retries (the writer may have
// started overwriting that half for v + 2).

#ifndef DREPLAY_REPLAY_SERVER_LAYOUT_H_
#define DREPLAY_REPLAY_SERVER_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "xxhash.h"

namespace dreplay::replay {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire layout is little-endian");

// ASCII "DREPLAY!" read as a little-endian u64.
inline constexpr uint64_t kMagic = 0x2159414C50455244ULL;
// Bumped on any change to a structure or protocol in this file.
inline constexpr uint32_t kLayoutVersion = 1;

inline constexpr size_t kCacheLine = 64;
// Every region buffer is allocated with this alignment.
inline constexpr size_t kRegionAlignment = 4096;
// slot_size must be a multiple of this (u64 header fields, word-wise copies).
inline constexpr uint32_t kSlotAlignment = 8;
// Seed of every XXH3 checksum in this file.
inline constexpr uint64_t kChecksumSeed = 0x64726570'6c617931ULL;

// Limits LayoutConfig::Validate() enforces.
inline constexpr uint64_t kMinCapacity = 2;
inline constexpr uint64_t kMaxCapacity = uint64_t{1} << 31;  // index fits u32
inline constexpr uint32_t kMaxSlotSize = 1u << 20;
inline constexpr uint32_t kMaxBatchSize = 1u << 16;
inline constexpr uint32_t kMaxStagingDepth = 1024;
inline constexpr uint64_t kMaxParamBytes = uint64_t{1} << 32;
inline constexpr uint32_t kMaxActors = 1u << 16;
inline constexpr size_t kTransitionSpecBytes = 64;

constexpr uint64_t RoundUp(uint64_t n, uint64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// ---------------------------------------------------------------------------
// LayoutConfig: the geometry of every region. The server publishes it in the
// control block; clients take it from there instead of from their own flags.

struct LayoutConfig {
  uint64_t capacity = 0;        // slots; a power of two
  uint64_t param_bytes = 0;     // capacity of one params half, bytes
  uint32_t slot_size = 0;       // bytes per slot, SlotHeader included
  uint32_t batch_size = 0;      // transitions per staged batch
  uint32_t staging_depth = 0;   // staged batches (and mailbox entries)
  uint32_t observation_size = 0;  // elements per observation (informational)
  uint32_t num_actions = 0;       // discrete actions (informational)
  // Lines in the actors region (ActorLine), one per actor id; actor ids must
  // be below it. 0: no actors region.
  uint32_t max_actors = 0;
  // Opaque description of the payload encoding, NUL-terminated and padded
  // with NULs (e.g. "cartpole-v1 f32 nstep=3"); clients compare it verbatim.
  char transition_spec[kTransitionSpecBytes] = {};
  // How far (in sequences) actors may run ahead of ingest_cursor, in
  // [0, capacity]; 0 means capacity. A window well below capacity (e.g.
  // capacity / 4) keeps most of the ring sampleable when actors outpace
  // ingest; see ActorWindow().
  uint64_t actor_window = 0;

  // OK, or InvalidArgument naming the first bad field and its value.
  absl::Status Validate() const;

  uint32_t max_payload() const;  // slot_size - sizeof(SlotHeader)
  uint64_t slot_mask() const { return capacity - 1; }
  std::string spec() const;  // transition_spec up to its first NUL
  // Sets transition_spec; InvalidArgument if `spec` does not fit (with NUL).
  absl::Status set_spec(const std::string& spec);
  // Field-by-field equality (reserved fields included).
  bool operator==(const LayoutConfig& other) const;
  bool operator!=(const LayoutConfig& other) const { return !(*this == other); }
  // "capacity=... slot_size=..." for messages.
  std::string DebugString() const;
  // "" when equal, else "<field>: <this> vs <other>" for the first difference.
  std::string FirstDifference(const LayoutConfig& other) const;
};
static_assert(sizeof(LayoutConfig) == 112, "LayoutConfig is a wire structure");
static_assert(offsetof(LayoutConfig, capacity) == 0, "");
static_assert(offsetof(LayoutConfig, param_bytes) == 8, "");
static_assert(offsetof(LayoutConfig, slot_size) == 16, "");
static_assert(offsetof(LayoutConfig, batch_size) == 20, "");
static_assert(offsetof(LayoutConfig, staging_depth) == 24, "");
static_assert(offsetof(LayoutConfig, observation_size) == 28, "");
static_assert(offsetof(LayoutConfig, num_actions) == 32, "");
static_assert(offsetof(LayoutConfig, max_actors) == 36, "");
static_assert(offsetof(LayoutConfig, transition_spec) == 40, "");
static_assert(offsetof(LayoutConfig, actor_window) == 104, "");

// ---------------------------------------------------------------------------
// Control block.

// Written once by the server before the region is registered.
struct alignas(kCacheLine) ControlHeader {
  uint64_t magic = 0;               // kMagic
  uint32_t layout_version = 0;      // kLayoutVersion
  uint32_t control_block_size = 0;  // sizeof(ControlBlock)
  LayoutConfig config;
};
static_assert(sizeof(ControlHeader) == 2 * kCacheLine, "");
static_assert(offsetof(ControlHeader, config) == 16, "");

// The actors' reservation counter, alone on its cache line. Changed only by
// remote FETCH_ADD (the server sets it once before registration, e.g. after a
// restore); the server reads it with atomic loads and never stores to it
// while actors are connected.
struct alignas(kCacheLine) TailLine {
  uint64_t tail = 0;  // next sequence number to hand out
  uint64_t reserved[7] = {};
};
static_assert(sizeof(TailLine) == kCacheLine, "");

// Words written only by the server's replay core (release stores); clients
// READ them.
struct alignas(kCacheLine) ServerLine {
  // Every sequence below this is done (ingested, abandoned or overrun); an
  // actor may write sequence q only when SequenceWritable(config, q, this).
  uint64_t ingest_cursor = 0;
  // Changes when the server restarts from a checkpoint; staged batches carry
  // it. Batch numbers restart at 0 in every epoch.
  uint64_t epoch = 0;
  // Number of batches staged (committed) in this epoch: batches 0 .. n-1.
  uint64_t batches_staged = 0;
  // Number of batches whose priority update has been consumed.
  uint64_t batches_released = 0;
  uint64_t reserved[4] = {};
};
static_assert(sizeof(ServerLine) == kCacheLine, "");

struct ControlBlock {
  ControlHeader header;  // [0, 128)
  TailLine tail;         // [128, 192)
  ServerLine server;     // [192, 256)
};
static_assert(sizeof(ControlBlock) == 256, "ControlBlock is a wire structure");
static_assert(alignof(ControlBlock) == kCacheLine, "");
static_assert(offsetof(ControlBlock, header) == 0, "");
static_assert(offsetof(ControlBlock, tail) == 128, "");
static_assert(offsetof(ControlBlock, server) == 192, "");
// The byte offset actors FETCH_ADD (relative to the control block, or 0 in
// the separately registered tail line region).
inline constexpr size_t kTailOffset = offsetof(ControlBlock, tail);
inline constexpr size_t kTailLineBytes = sizeof(TailLine);
inline constexpr size_t kIngestCursorOffset =
    offsetof(ControlBlock, server) + offsetof(ServerLine, ingest_cursor);
static_assert(kTailOffset % 8 == 0, "RDMA atomics need 8-byte alignment");

// OK if the block carries kMagic, kLayoutVersion and a valid config;
// FailedPrecondition (magic/version) or InvalidArgument (config) otherwise.
// For clients checking what they READ at connect time.
absl::Status CheckControlHeader(const ControlHeader& header);

// ---------------------------------------------------------------------------
// Slot ring and commit words.

struct SlotHeader {
  // XXH3-64 (kChecksumSeed) of bytes [8, sizeof(SlotHeader) + payload_length)
  // of the slot: every header field after this one, then the payload.
  uint64_t checksum;
  uint64_t sequence;         // the reserved sequence number
  uint32_t actor_id;         // informational
  uint32_t payload_length;   // bytes of payload after the header
  // Raw priority (e.g. |TD error|) from the actor; <= 0 or not finite means
  // "no estimate: use the current maximum".
  float initial_priority;
  uint32_t reserved;         // 0
};
static_assert(sizeof(SlotHeader) == 32, "SlotHeader is a wire structure");
static_assert(offsetof(SlotHeader, checksum) == 0, "");
static_assert(offsetof(SlotHeader, sequence) == 8, "");
static_assert(offsetof(SlotHeader, actor_id) == 16, "");
static_assert(offsetof(SlotHeader, payload_length) == 20, "");
static_assert(offsetof(SlotHeader, initial_priority) == 24, "");
inline constexpr size_t kSlotChecksumBegin = sizeof(uint64_t);

// The commit word of a slot holding `sequence`. 0 means "never committed".
constexpr uint64_t CommitValue(uint64_t sequence) { return sequence + 1; }
inline constexpr uint64_t kNeverCommitted = 0;

inline uint64_t SlotIndex(const LayoutConfig& c, uint64_t sequence) {
  return sequence & c.slot_mask();
}

// Sequences actors may run ahead of ingest_cursor (see LayoutConfig).
inline uint64_t ActorWindow(const LayoutConfig& c) {
  return c.actor_window != 0 ? c.actor_window : c.capacity;
}
// True when an actor may write `sequence` now that the server published
// `ingest_cursor`.
inline bool SequenceWritable(const LayoutConfig& c, uint64_t sequence, uint64_t ingest_cursor) {
  return sequence < ingest_cursor + ActorWindow(c);
}

// Checksum of a slot whose header says `payload_length` bytes follow.
// REQUIRES: sizeof(SlotHeader) + payload_length bytes readable at `slot`.
inline uint64_t SlotChecksum(const void* slot, uint32_t payload_length) {
  const auto* p = static_cast<const uint8_t*>(slot);
  return XXH3_64bits_withSeed(p + kSlotChecksumBegin,
                              sizeof(SlotHeader) - kSlotChecksumBegin + payload_length,
                              kChecksumSeed);
}

enum class SlotCheck : uint8_t {
  kOk,
  kBadLength,      // payload_length > slot_size - sizeof(SlotHeader)
  kWrongSequence,  // header.sequence != the expected sequence
  kBadChecksum,
};
const char* SlotCheckName(SlotCheck check);

// Verifies a slot image of `slot_size` bytes (in the ring or copied out of
// it) against the sequence it should hold. Never reads past slot_size.
SlotCheck VerifySlot(const void* slot, uint32_t slot_size, uint64_t expected_sequence);

// Fills a slot image: header fields, the payload, and the checksum.
// InvalidArgument if the payload does not fit in slot_size. `slot` must hold
// slot_size bytes; bytes after the payload are left as they are.
absl::Status SealSlot(void* slot, uint32_t slot_size, uint64_t sequence,
                      uint32_t actor_id, float initial_priority,
                      const void* payload, uint32_t payload_length);

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
  uint32_t count;       // entries in this batch (<= batch_size)
  uint32_t slot_size;   // stride of the copied slots (== config.slot_size)
  uint64_t size;        // N: valid transitions in memory when sampled
  float beta;           // importance-sampling exponent used
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
absl::Status CheckStagedBatch(const LayoutConfig& config, const void* image,
                              uint64_t batch_number, uint64_t epoch);

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
  uint64_t epoch;      // the epoch of the batch being answered
  uint32_t count;      // records (<= batch_size)
  uint32_t reserved0;
  uint64_t reserved[4];
};
static_assert(sizeof(MailboxHeader) == kCacheLine, "MailboxHeader is a wire structure");
static_assert(offsetof(MailboxHeader, batch_number) == 8, "");
static_assert(offsetof(MailboxHeader, epoch) == 16, "");
static_assert(offsetof(MailboxHeader, count) == 24, "");

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
// update for batch `batch_number` of `epoch`: header, records, checksum and
// the commit line. WRITE bytes [0, MailboxCommitOffset) of it to the entry,
// then the commit line with a second WRITE on the same queue pair.
// InvalidArgument if there are more records than batch_size or `entry` is
// too small.
absl::Status EncodePriorityUpdate(const LayoutConfig& config, uint64_t batch_number,
                                  uint64_t epoch, absl::Span<const PriorityRecord> records,
                                  absl::Span<uint8_t> entry);

// ---------------------------------------------------------------------------
// Params region.
//
//   [0, 64)                          ParamsHeader
//   [64 + h * ParamsHalfStride, ...) half h (h = 0, 1): ParamsHalfHeader,
//                                    then param_bytes of data

struct ParamsHeader {
  uint64_t version;      // last published version; 0 = none yet
  uint32_t active_half;  // ParamsHalfOf(version)
  uint32_t reserved0;
  uint64_t reserved[6];
};
static_assert(sizeof(ParamsHeader) == kCacheLine, "");

struct ParamsHalfHeader {
  // XXH3-64 (kChecksumSeed) of half bytes [8, 64 + size).
  uint64_t checksum;
  uint64_t version;
  uint64_t size;  // bytes of data (<= param_bytes)
  uint64_t reserved[5];
};
static_assert(sizeof(ParamsHalfHeader) == kCacheLine, "");

constexpr uint32_t ParamsHalfOf(uint64_t version) { return static_cast<uint32_t>(version & 1); }
inline uint64_t ParamsHalfStride(const LayoutConfig& c) {
  return sizeof(ParamsHalfHeader) + RoundUp(c.param_bytes, kCacheLine);
}
inline uint64_t ParamsHalfOffset(const LayoutConfig& c, uint32_t half) {
  return sizeof(ParamsHeader) + uint64_t{half} * ParamsHalfStride(c);
}
// Checksum of a half image whose header says `size` bytes (clamped to
// param_bytes).
uint64_t ParamsChecksum(const LayoutConfig& c, const void* half, uint64_t size);

// Writer side: fills `half` (at least sizeof(ParamsHalfHeader) + data.size()
// bytes) with version `version` of the parameters. InvalidArgument when data
// exceeds param_bytes or `half` is too small.
absl::Status EncodeParamsHalf(const LayoutConfig& config, uint64_t version,
                              absl::Span<const uint8_t> data, absl::Span<uint8_t> half);
// Reader side: OK when the half image holds `expected_version` whole;
// Unavailable for another version, DataLoss for a torn or malformed one
// (READ the header and the half again).
absl::Status CheckParamsHalf(const LayoutConfig& config, const void* half,
                             uint64_t expected_version);

// ---------------------------------------------------------------------------
// Stats region. Counters are totals since the start of the epoch's process
// (restored from a checkpoint); a monitor computes rates from two READs and
// server_time_ns. The replay core writes lines [0, 384) with a generation
// pair: generation_begin is stored first and generation_end last, so a
// snapshot READ with begin == end is consistent. The connection line is
// written by the server's connection handling, outside that protocol.

struct alignas(kCacheLine) StatsBlock {
  // Replay core.
  uint64_t generation_begin;
  uint64_t server_time_ns;        // steady clock of the server
  uint64_t epoch;
  uint64_t ingest_cursor;
  uint64_t tail_seen;             // tail as last read by ingest
  uint64_t size;                  // valid transitions in memory
  uint64_t capacity;
  uint64_t inserted;              // transitions accepted by ingest
  uint64_t abandoned_slots;       // reserved, never committed in time
  uint64_t overrun_slots;         // lapped before ingest
  uint64_t torn_slots;            // committed but failed sequence/checksum
  uint64_t sampled;               // transitions staged
  uint64_t batches_staged;
  uint64_t batches_released;      // priority updates consumed
  uint64_t sample_copy_rejects;   // overwritten during the staging copy
  uint64_t priority_updates_applied;
  uint64_t priority_updates_stale;    // slot no longer holds that sequence
  uint64_t priority_updates_invalid;  // bad index or priority value
  uint64_t mailbox_rejects;           // bad checksum / header in an update
  uint64_t staging_stalls;            // steps a batch waited for its update
  double priority_sum;            // sum of p^alpha over memory
  double priority_max;            // max of p^alpha over memory
  uint64_t checkpoints_written;
  uint64_t updates_timed_out;     // staging slots freed without an update
  uint64_t restore_dropped;       // slots failing verification on restore
  uint64_t reserved[22];
  uint64_t generation_end;
  // Connection handling (own line, other writer).
  uint64_t actors_connected;
  uint64_t learners_connected;
  uint64_t monitors_connected;
  uint64_t connections_total;
  uint64_t connections_rejected;
  uint64_t reserved_conn[3];
};
static_assert(sizeof(StatsBlock) == 448, "StatsBlock is a wire structure");
static_assert(offsetof(StatsBlock, generation_end) == 376, "");
static_assert(offsetof(StatsBlock, actors_connected) == 384, "");
static_assert(offsetof(StatsBlock, priority_sum) == 160, "");

// ---------------------------------------------------------------------------
// Actors region: config.max_actors ActorLine, line a for actor id a. Each
// actor publishes its episode statistics by WRITEing its whole line (one
// 64-byte WRITE; the server registers every line on its own, so an actor's
// key covers its line only); the learner and monitors READ the region. A
// WRITE is not placed in order, so a reader accepts a line only when
// CheckActorLine() verifies its checksum, and READs again otherwise. The
// server never writes the region (it is zero-filled at start and not
// checkpointed).

struct ActorLine {
  // XXH3-64 (kChecksumSeed) of bytes [8, 64) of the line; see SealActorLine.
  uint64_t checksum;
  uint32_t actor_id;
  uint32_t returns_count;  // episode returns summed in returns_sum
  uint64_t env_steps;      // environment steps since the actor started
  uint64_t episodes;       // episodes finished since the actor started
  double returns_sum;      // sum of the last returns_count episode returns
  double last_return;      // return of the last finished episode
  uint64_t updated_ns;     // actor's wall clock (ns since the Unix epoch)
  uint64_t transitions;    // transitions the actor has committed
};
static_assert(sizeof(ActorLine) == kCacheLine, "ActorLine is a wire structure");
static_assert(offsetof(ActorLine, actor_id) == 8, "");
static_assert(offsetof(ActorLine, env_steps) == 16, "");
static_assert(offsetof(ActorLine, returns_sum) == 32, "");
static_assert(offsetof(ActorLine, updated_ns) == 48, "");
static_assert(offsetof(ActorLine, transitions) == 56, "");

inline uint64_t ActorLineOffset(uint32_t actor_id) { return uint64_t{actor_id} * sizeof(ActorLine); }
// Sets line->checksum from the other fields.
void SealActorLine(ActorLine* line);
// OK when `line` (a READ image) is a whole line of actor `actor_id`;
// NotFound when it was never written (all zero); DataLoss when the checksum
// or the actor id does not match (a torn READ: READ again).
absl::Status CheckActorLine(const ActorLine& line, uint32_t actor_id);

// ---------------------------------------------------------------------------
// Region sizes (bytes).

inline uint64_t ControlRegionBytes(const LayoutConfig&) { return sizeof(ControlBlock); }
inline uint64_t SlotRingBytes(const LayoutConfig& c) { return c.capacity * c.slot_size; }
inline uint64_t CommitWordsBytes(const LayoutConfig& c) { return c.capacity * sizeof(uint64_t); }
inline uint64_t StagingRingBytes(const LayoutConfig& c) {
  return uint64_t{c.staging_depth} * StagingSlotStride(c);
}
inline uint64_t MailboxBytes(const LayoutConfig& c) {
  return uint64_t{c.staging_depth} * MailboxEntryStride(c);
}
inline uint64_t ParamsRegionBytes(const LayoutConfig& c) {
  return sizeof(ParamsHeader) + 2 * ParamsHalfStride(c);
}
inline uint64_t StatsRegionBytes(const LayoutConfig&) { return sizeof(StatsBlock); }
inline uint64_t ActorsRegionBytes(const LayoutConfig& c) {
  return uint64_t{c.max_actors} * sizeof(ActorLine);
}

// ---------------------------------------------------------------------------
// Region directory: what the handshake hands a client. The server fills in
// only the regions the client's role needs (present_mask).

enum class RegionKind : uint32_t {
  kControl = 0,  // whole ControlBlock, READ
  kTail = 1,     // the TailLine alone, FETCH_ADD (offset 0 = tail)
  kSlots = 2,
  kCommits = 3,
  kStaging = 4,
  kMailbox = 5,
  kParams = 6,
  kStats = 7,
  kActors = 8,   // READ: every ActorLine; an actor's: its own line, WRITE
};
inline constexpr uint32_t kNumRegionKinds = 9;
const char* RegionKindName(RegionKind kind);

// The shape of verbs::RemoteRegion, copied so that the layout does not
// depend on verbs/.
struct WireRegion {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t rkey = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(WireRegion) == 24, "WireRegion matches verbs::RemoteRegion");

struct RegionDirectory {
  uint64_t magic = kMagic;
  uint32_t layout_version = kLayoutVersion;
  uint32_t present_mask = 0;  // bit k set: regions[k] is filled in
  WireRegion regions[kNumRegionKinds] = {};

  void Set(RegionKind kind, const WireRegion& region);
  bool Has(RegionKind kind) const;
  // The region, or a zeroed one when absent.
  const WireRegion& Get(RegionKind kind) const;
  // OK if magic and version match and every present region is non-empty.
  absl::Status Validate() const;
};
static_assert(sizeof(RegionDirectory) == 16 + 24 * kNumRegionKinds, "");
static_assert(offsetof(RegionDirectory, regions) == 16, "");

}  // namespace dreplay::replay

#endif  // DREPLAY_REPLAY_SERVER_LAYOUT_H_
