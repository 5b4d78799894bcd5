// Copyright dreplay authors.
//
// transition_check.h: whether a slot's payload is a transition a learner can
// train on, as the server's transition spec (transition_spec.h) describes it.
//
// The payload is transition_encoding.h's layout (a 20-byte header, then the
// observation and the next observation, spec.observation_size values of
// spec.observation_type each), possibly followed by the actor's padding. CheckTransition() accepts
// it only when every one of these holds, and otherwise names the first that fails:
//
//   kTooShort          the payload holds the whole encoding
//   kObservationSize   the header's observation_size is spec.observation_size
//   kObservationType   the header's observation_type is spec.observation_type
//   kAction            0 <= action < spec.action_count
//   kReward            reward is finite
//   kDiscount          discount is in [0, 1] (not NaN)
//   kFields            done is 0 or 1, steps in [1, spec.n_step], reserved 0
//   kObservation       every float of both observations is finite (f32;
//                      every u8 value is valid)
//
// The server checks every transition at ingest and drops (counts) what
// fails (replay_server/ingest.h); the learner checks again before it trains
// (a payload may reach it from a server without a spec, or from an older
// checkpoint), drops and counts. One actor's bad data so never stops the
// learner nor reaches the parameters every actor fetches.
//
//   TransitionSpec spec = ...;  // from LayoutConfig::spec()
//   if (CheckTransition(spec, payload) != TransitionFault::kNone) drop it;
//
// Thread safety: pure functions. CheckTransition() never allocates.

#ifndef DREPLAY_PROTOCOL_TRANSITION_CHECK_H_
#define DREPLAY_PROTOCOL_TRANSITION_CHECK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "protocol/transition_encoding.h"
#include "protocol/transition_spec.h"

namespace dreplay::protocol {

enum class TransitionFault : uint8_t {
  kNone = 0,
  kTooShort,
  kObservationSize,
  kAction,
  kReward,
  kDiscount,
  kFields,
  kObservation,
  kObservationType,
};

// "none", "too_short", "observation_size", "action", "reward", "discount",
// "fields", "observation", "observation_type".
const char* TransitionFaultName(TransitionFault fault);

// The first check above that `payload` fails under `spec`; kNone when it
// passes. REQUIRES: spec.observation_size > 0, spec.action_count > 0 and
// spec.n_step > 0 (what TransitionSpec::Parse accepts).
TransitionFault CheckTransition(const TransitionSpec& spec, absl::Span<const uint8_t> payload);

// As CheckTransition(), as a status: OK, or InvalidArgument naming the fault
// and the offending value.
absl::Status CheckTransitionStatus(const TransitionSpec& spec, absl::Span<const uint8_t> payload);

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_TRANSITION_CHECK_H_
