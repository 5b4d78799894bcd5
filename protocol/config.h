// Copyright dreplay authors.
//
// config.h: constants, the LayoutConfig every region is sized from, and the
// control block (configuration, the server's line, the replay policy).
//
// Part of the replay service's wire contract (protocol/README.md): shared by
// the server and its clients through RDMA-registered memory. Nothing here
// depends on verbs/. All integers are little-endian; floats are IEEE 754.

#ifndef DREPLAY_PROTOCOL_CONFIG_H_
#define DREPLAY_PROTOCOL_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace dreplay::protocol {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire layout is little-endian");

// ASCII "DREPLAY!" read as a little-endian u64.
inline constexpr uint64_t kMagic = 0x2159414C50455244ULL;
// Bumped on any change to a structure or protocol of protocol/.
inline constexpr uint32_t kLayoutVersion = 17;

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
inline constexpr uint32_t kMaxLeases = 1u << 16;
inline constexpr uint64_t kMinLeaseSlots = 2;
inline constexpr uint32_t kMaxFrameStack = 16;  // protocol::kMaxFrameStackDepth
inline constexpr size_t kTransitionSpecBytes = 64;

constexpr uint64_t RoundUp(uint64_t n, uint64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// ---------------------------------------------------------------------------
// LayoutConfig: the geometry of every region. The server publishes it in the
// control block; clients take it from there instead of from their own flags.

struct LayoutConfig {
  uint64_t capacity = 0;          // slots; a power of two
  uint64_t param_bytes = 0;       // capacity of one params half, bytes
  uint32_t slot_size = 0;         // bytes per slot, SlotHeader included
  uint32_t batch_size = 0;        // transitions per staged batch
  uint32_t staging_depth = 0;     // staged batches (and mailbox entries)
  uint32_t observation_size = 0;  // elements per observation (informational)
  uint32_t num_actions = 0;       // discrete actions (informational)
  // Lines in the actors region (ActorLine), one per actor id; actor ids must
  // be below it (replay_server --actor_ids). 0: no actors region.
  uint32_t max_actors = 0;
  // Opaque description of the payload encoding, NUL-terminated and padded
  // with NULs (e.g. "cartpole-v1 f32 nstep=3"); clients compare it verbatim.
  char transition_spec[kTransitionSpecBytes] = {};
  // How far (in sequences) an actor may run ahead of its lease's ingest
  // cursor, in [0, capacity]; 0, or more than a lease's slots, means a
  // whole lease (LeaseSlots). A window well below the lease (e.g. a quarter
  // of it) keeps most of the lease sampleable when its actor outpaces
  // ingest; see ActorWindow().
  uint64_t actor_window = 0;
  // Actor leases (protocol/leases.h; replay_server --leases): the ring is
  // split statically into `leases` equal ranges of LeaseSlots() = capacity / leases slots (the
  // remainder, capacity % leases slots at the end of the ring, is unused).
  // In [1, kMaxLeases]; capacity / leases must be at least kMinLeaseSlots.
  uint32_t leases = 1;
  // Frames stored once (layout 15; protocol/frame_record.h): 0, slots hold
  // encoded transitions; D in [1, kMaxFrameStackDepth], slots hold frame
  // records of stacks of D frames, observation_size (the stack's elements)
  // is a multiple of D, and a staged batch carries the records its
  // transitions need after them (StagingEntryCapacity()).
  uint32_t frame_stack = 0;

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
static_assert(sizeof(LayoutConfig) == 120, "LayoutConfig is a wire structure");
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
static_assert(offsetof(LayoutConfig, leases) == 112, "");
static_assert(offsetof(LayoutConfig, frame_stack) == 116, "");

// ---------------------------------------------------------------------------
// Control block.

// Written once by the server before the region is registered.
struct alignas(kCacheLine) ControlHeader {
  uint64_t magic = 0;               // kMagic
  uint32_t layout_version = 0;      // kLayoutVersion
  uint32_t control_block_size = 0;  // sizeof(ControlBlock)
  LayoutConfig config;
};
static_assert(sizeof(ControlHeader) == 3 * kCacheLine, "");
static_assert(offsetof(ControlHeader, config) == 16, "");

// Words written only by the server's replay core (release stores); clients
// READ them.
struct alignas(kCacheLine) ServerLine {
  // Sequences handled by ingest over all leases (the sum of the leases'
  // ingest cursors, protocol/leases.h): informational. Actors follow their
  // own lease's cursor.
  uint64_t ingest_cursor = 0;
  // Changes when the server restarts from a checkpoint; staged batches carry
  // it. Batch numbers restart at 0 in every epoch.
  uint64_t epoch = 0;
  // Number of batches staged (committed) in this epoch: batches 0 .. n-1.
  uint64_t batches_staged = 0;
  // Number of batches whose priority update has been consumed.
  uint64_t batches_released = 0;
  // Drawn at random (never 0) each time a server process starts. Epoch
  // numbers can repeat (every server without checkpoints runs epoch 1);
  // (epoch, incarnation) never does. Staged batches carry it and priority
  // updates must echo it.
  uint64_t incarnation = 0;
  // Forward journal entries written (protocol/leases.h): entries 0 .. n-1,
  // entry j in journal slot j % kJournalEntries. The learner placement
  // follows it.
  uint64_t journal_end = 0;
  uint64_t reserved[2] = {};
};
static_assert(sizeof(ServerLine) == kCacheLine, "");
static_assert(offsetof(ServerLine, incarnation) == 32, "");
static_assert(offsetof(ServerLine, journal_end) == 40, "");

// PolicyLine::forward.
enum class ForwardMode : uint32_t {
  kForwardOff = 0,
  kForwardPriority = 1,
  kForwardUniform = 2,
  kForwardFifo = 3,
};

// PolicyLine::link_codec: the compression of staged batches' copied slots.
enum class LinkCodec : uint32_t {
  kNone = 0,
  kLz4 = 1,
  kLz4Hc = 2,
  kZstd = 3,
};

// The server's replay policy, written once before registration: the
// samples-per-insert rate limiter (replay/rate_limiter.h) the sampler obeys.
struct alignas(kCacheLine) PolicyLine {
  // Target transitions sampled per transition inserted; 0: no limit.
  double samples_per_insert = 0;
  // How far (in sampled transitions) sampled may run ahead of, or with
  // block_actors behind, samples_per_insert * (inserted - min_size_to_sample).
  double spi_error_buffer = 0;
  // No batch is staged until the memory holds this many transitions.
  uint64_t min_size_to_sample = 0;
  // 1: ingest pauses (and with it the actors, through the actor window)
  // while inserts run more than the error buffer ahead of samples.
  uint32_t spi_block_actors = 0;
  // How the sampler stages batches (layout 13): ForwardMode. kForwardOff:
  // sampled with replacement under the limiter above, for a learner that
  // trains on them (the buffer placement). Otherwise each transition is
  // staged at most once, for a learner that keeps its own replay (the
  // hybrid placement), chosen by priority, uniformly, or oldest first from
  // a drop-oldest queue of forward_queue transitions; the limiter's fields
  // then do not apply.
  uint32_t forward = 0;
  uint64_t forward_queue = 0;  // kForwardFifo only: the queue's bound
  // Staged batches' copied slots compressed on the link (layout 15):
  // LinkCodec, and its level. A batch says whether its payloads are
  // (BatchHeader::packed_bytes); this says with what.
  uint32_t link_codec = 0;
  int32_t link_codec_level = 0;
  uint64_t reserved[2] = {};
};
static_assert(sizeof(PolicyLine) == kCacheLine, "");

struct ControlBlock {
  ControlHeader header;  // [0, 192)
  ServerLine server;     // [192, 256)
  PolicyLine policy;     // [256, 320)
};
static_assert(sizeof(ControlBlock) == 320, "ControlBlock is a wire structure");
static_assert(alignof(ControlBlock) == kCacheLine, "");
static_assert(offsetof(ControlBlock, header) == 0, "");
static_assert(offsetof(ControlBlock, server) == 192, "");
static_assert(offsetof(ControlBlock, policy) == 256, "");
inline constexpr size_t kIngestCursorOffset =
    offsetof(ControlBlock, server) + offsetof(ServerLine, ingest_cursor);

// OK if the block carries kMagic, kLayoutVersion and a valid config;
// FailedPrecondition (magic/version) or InvalidArgument (config) otherwise.
// For clients checking what they READ at connect time.
absl::Status CheckControlHeader(const ControlHeader& header);

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_CONFIG_H_
