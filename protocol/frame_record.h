// Copyright dreplay authors.
//
// frame_record.h: the byte layout of a frame record, the unit in which an
// actor stores frame-stacked observations once: each new frame once, and
// each n-step transition as references to the records that hold the frames
// of its two stacks. rl/frame_recorder.h makes records from an actor's
// steps; rl/frame_stacks.h assembles a transition's stacks from them. This
// is its one definition.
//
// On the wire since layout version 15: a server whose LayoutConfig has a
// frame_stack D holds one record per slot (after the SlotHeader), and its
// staged batches carry the records their transitions need
// (protocol/staging.h).
//
// An actor appends records to one sequence (its lease: record q follows
// record q - 1). A reference is a back distance d: the frame in record
// q - d. So a record only ever refers to itself and to records before it,
// and a transition can be used as soon as its own record is there; it can
// no longer be used once any record it refers to was overwritten.
//
// Layout (little-endian, FrameRecordBytes(depth, frame_bytes) bytes, or the
// header and references only for a record without a frame):
//
//   offset    size   field
//   0         4      frame_bytes f (u32): the frame's bytes, or 0 when the
//                    record carries none
//   4         4      action (i32)       } the n-step transition the record
//   8         4      reward (f32)       } completes (kFrameHasTransition),
//   12        4      discount (f32)     } with transition_encoding.h's
//   16        1      done (u8, 0 or 1)  } meanings; all zero without one
//   17        1      steps (u8)         }
//   18        1      kind (u8): kFrameRecordKind, which no transition
//                    encoding has at this offset
//   19        1      flags (u8): kFrameHas* bits
//   20        1      depth D (u8): frames in a stack, 1..kMaxFrameStackDepth
//   21        3      reserved, zero
//   24        2*D    observation references (u16): back distances to the
//                    records of the observation's frames, oldest first
//   24+2D     2*D    next_observation references, the same
//   R         f      the frame, at R = FrameRecordRefsEnd(D) rounded up to 8
//
// A record with a frame and no transition starts an episode (its first
// frame) or follows one by fewer than n steps. A record with a transition
// and no frame is one of the transitions an episode's end completes at once
// (n-step: the last steps' transitions), after the record of the last
// frame. References of a record without a transition are zero.
//
// Thread safety: constants and pure functions.

#ifndef DREPLAY_PROTOCOL_FRAME_RECORD_H_
#define DREPLAY_PROTOCOL_FRAME_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "protocol/config.h"
#include "protocol/transition_check.h"
#include "protocol/transition_spec.h"

namespace dreplay::protocol {

inline constexpr uint8_t kFrameRecordKind = 2;
inline constexpr int kMaxFrameStackDepth = static_cast<int>(kMaxFrameStack);
// The longest back distance a reference can state.
inline constexpr uint32_t kMaxFrameReference = 65535;

// flags bits.
inline constexpr uint8_t kFrameHasFrame = 1;
inline constexpr uint8_t kFrameHasTransition = 2;
inline constexpr uint8_t kFrameEpisodeStart = 4;  // the frame is its episode's first
inline constexpr uint8_t kFrameKnownFlags =
    kFrameHasFrame | kFrameHasTransition | kFrameEpisodeStart;

struct FrameRecordHeader {
  uint32_t frame_bytes;
  int32_t action;
  float reward;
  float discount;
  uint8_t done;
  uint8_t steps;
  uint8_t kind;
  uint8_t flags;
  uint8_t depth;
  uint8_t reserved[3];
};
inline constexpr size_t kFrameRecordHeaderBytes = 24;
static_assert(sizeof(FrameRecordHeader) == kFrameRecordHeaderBytes, "the header has no padding");
static_assert(offsetof(FrameRecordHeader, action) == 4);
static_assert(offsetof(FrameRecordHeader, reward) == 8);
static_assert(offsetof(FrameRecordHeader, discount) == 12);
static_assert(offsetof(FrameRecordHeader, done) == 16);
static_assert(offsetof(FrameRecordHeader, steps) == 17);
static_assert(offsetof(FrameRecordHeader, kind) == 18);
static_assert(offsetof(FrameRecordHeader, flags) == 19);
static_assert(offsetof(FrameRecordHeader, depth) == 20);

// Where the references end: the header and 2 * depth u16s.
constexpr size_t FrameRecordRefsEnd(int depth) {
  return kFrameRecordHeaderBytes + 2 * 2 * static_cast<size_t>(depth);
}
// Where the frame starts: the references' end rounded up to 8 bytes.
constexpr size_t FrameRecordFrameOffset(int depth) {
  return (FrameRecordRefsEnd(depth) + 7) / 8 * 8;
}
// Bytes of a record with a frame of `frame_bytes`.
constexpr size_t FrameRecordBytes(int depth, size_t frame_bytes) {
  return FrameRecordFrameOffset(depth) + frame_bytes;
}
static_assert(FrameRecordFrameOffset(4) == 40, "pixels84's 4-frame stacks");

// A record's fields, decoded; `observation_refs` and `next_refs` hold
// `depth` back distances each; `frame` views the record's bytes.
struct FrameRecordView {
  FrameRecordHeader header;
  uint16_t observation_refs[kMaxFrameStackDepth];
  uint16_t next_refs[kMaxFrameStackDepth];
  absl::Span<const uint8_t> frame;

  bool has_frame() const { return (header.flags & kFrameHasFrame) != 0; }
  bool has_transition() const { return (header.flags & kFrameHasTransition) != 0; }
  bool episode_start() const { return (header.flags & kFrameEpisodeStart) != 0; }
};

// Decodes the record at the start of `bytes` (an actor's slot padding may
// follow it). INVALID_ARGUMENT naming the field for a record no encoder
// writes: another kind, unknown flags, depth outside 1..kMaxFrameStackDepth,
// nonzero reserved bytes, a frame_bytes that disagrees with the frame flag
// or with `frame_bytes` (the stream's frame size), bytes too short for what
// the header states, transition fields with no transition (or, with one,
// done not 0/1, steps 0, negative action, discount outside [0, 1]), a
// reference of a record without a transition, a zero reference to a record
// without a frame, or an episode's first frame referring to earlier ones.
absl::Status DecodeFrameRecord(absl::Span<const uint8_t> bytes, size_t frame_bytes,
                               FrameRecordView* out);

// Writes the record `record` describes (its header's frame_bytes, kind and
// reserved bytes are set here from `record.frame` and the layout) at the
// start of `out`; returns its size. INVALID_ARGUMENT when `out` is too
// small or the record would not decode (DecodeFrameRecord's rules).
absl::StatusOr<size_t> EncodeFrameRecord(const FrameRecordView& record, absl::Span<uint8_t> out);

// The sequences of the records the transition in `record` (at `sequence`)
// needs: its observation's frames then its next observation's, oldest
// first, record.header.depth each, repeats included (a reference of 0 is
// `sequence` itself). REQUIRES: record.has_transition().
std::vector<uint64_t> FrameRecordSequences(const FrameRecordView& record, uint64_t sequence);

// Whether `payload` is a frame record of stacks of `depth` frames that a
// learner can train on under `spec`, whose observation_size is the stack's
// bytes (depth x frame bytes) and whose observation type is u8; the server
// runs it at ingest, the learner before it trains, as CheckTransition() for
// encoded transitions. The first fault, in this order:
//   kObservationType  spec's observations are not u8
//   kTooShort         shorter than the header, or than the header states
//   kObservationSize  depth is not `depth`, or frame_bytes is neither 0 nor
//                     spec.observation_size / depth
//   kAction           a transition's action outside [0, spec.action_count)
//   kReward           a transition's reward is not finite
//   kDiscount         a transition's discount outside [0, 1]
//   kFields           steps above spec.n_step, or anything else
//                     DecodeFrameRecord() refuses
// kNone, with `*out` decoded, when it passes. Never allocates when it passes.
TransitionFault CheckFrameRecord(const TransitionSpec& spec, int depth,
                                 absl::Span<const uint8_t> payload, FrameRecordView* out);

// True when byte 18 of `payload` marks a frame record (an encoded
// transition has an observation type, 0 or 1, there).
bool IsFrameRecord(absl::Span<const uint8_t> payload);

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_FRAME_RECORD_H_
