// Copyright dreplay authors.
//
// transition_spec.h: the description of the experience encoding that the
// replay server publishes in its LayoutConfig::transition_spec, so that
// actors and the learner agree on what a slot's payload means.
//
// Format (ASCII, space-separated key=value pairs, this order, at most
// protocol::kTransitionSpecBytes - 1 characters):
//
//   env=CartPole-v1 obs=4 act=2 nstep=3 gamma=0.99
//   env=MinAtar/Breakout obs=28224u8 act=6 nstep=3 gamma=0.99
//
// env is the environment's name, obs the values per observation followed by
// their element type (a bare number is f32; "u8" after it, bytes; "f32" is
// read too), act the number of actions, nstep the n of the n-step
// transitions and gamma their discount. The payload itself is
// transition_encoding.h's layout. The type rides on obs, not in a key of its
// own, so that the longest MinAtar spec (SpaceInvaders rendered to 84x84
// frames) fits the 64-byte field.
//
// A server started without a spec (empty string) publishes nothing to
// check; clients then rely on their own flags.
//
//   TransitionSpec spec{"CartPole-v1", 4, 2, 3, 0.99};
//   std::string text = spec.ToString();
//   ASSIGN_OR_RETURN(TransitionSpec published, TransitionSpec::Parse(text));
//   RETURN_IF_ERROR(spec.CheckMatches(published));
//
// Thread safety: plain values; thread-compatible.

#ifndef DREPLAY_PROTOCOL_TRANSITION_SPEC_H_
#define DREPLAY_PROTOCOL_TRANSITION_SPEC_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "protocol/transition_encoding.h"

namespace dreplay::protocol {

struct TransitionSpec {
  std::string env;
  int observation_size = 0;
  int action_count = 0;
  int n_step = 0;
  double gamma = 0.0;
  ObservationType observation_type = ObservationType::kFloat32;

  // Parses the format above. InvalidArgument naming the text and the part
  // that is wrong (unknown or missing key, bad number).
  static absl::StatusOr<TransitionSpec> Parse(absl::string_view text);

  // The text form; Parse(ToString()) gives back an equal spec (gamma is
  // printed with enough digits to round-trip).
  std::string ToString() const;

  // OK when `published` describes the same encoding; FailedPrecondition
  // naming the first field that differs, with both values, otherwise.
  // gamma is compared with a relative tolerance of 1e-9.
  absl::Status CheckMatches(const TransitionSpec& published) const;
};

}  // namespace dreplay::protocol

#endif  // DREPLAY_PROTOCOL_TRANSITION_SPEC_H_
