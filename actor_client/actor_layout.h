// Copyright dreplay authors.
//
// actor_layout.h: what an actor's transitions and network need of the
// replay server, computed from the actor's own settings (environment, n,
// gamma, hidden layers). Two uses:
//
//   * `actor --print_layout` prints it as one JSON object, which launchers
//     read to start a server that fits (tools/launch/run_local.py), so that no
//     script repeats the sizes below:
//
//       {"env":"CartPole-v1","observation":"native",
//        "transition_spec":"env=CartPole-v1 obs=4 act=2 nstep=3 gamma=0.99",
//        "observation_size":4,"num_actions":2,"payload_bytes":52,"slot_size":88,
//        "params_bytes":17928,"payload_pad_bytes":0}
//
//   * CheckServerConfig() compares it with the configuration a server
//     publishes, before the actor writes anything.
//
// payload_bytes is rl::EncodedTransitionSize() of the observation size and
// type (u8 for MinAtar, f32 otherwise), or with a frame stack D the bytes
// of a frame record with one frame of observation_size / D bytes
// (protocol::FrameRecordBytes), plus
// payload_pad_bytes (the actor's --payload_pad_bytes, ActorLoopOptions);
// slot_size is protocol::SlotSizeFor() of it (the server's --slot_size must
// be at least that); params_bytes is the size of the serialized network
// (rl/params_format.h): what the learner publishes when it has the same
// environment and --hidden, the least the server's --param_bytes must be.
//
// Thread safety: plain values and functions; thread-compatible.

#ifndef DREPLAY_ACTOR_CLIENT_ACTOR_LAYOUT_H_
#define DREPLAY_ACTOR_CLIENT_ACTOR_LAYOUT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "protocol/layout.h"
#include "protocol/transition_spec.h"
#include "rl/minatar_games.h"

namespace dreplay::actor {

struct ActorLayout {
  // env, observation size and type, action count, n and gamma.
  protocol::TransitionSpec spec;
  rl::ObservationMode observation = rl::ObservationMode::kNative;
  size_t payload_bytes = 0;
  size_t slot_size = 0;
  size_t params_bytes = 0;
  size_t payload_pad_bytes = 0;  // included in payload_bytes
  // Frames stored once (ActorLoopOptions::frame_stack): payload_bytes is
  // then a frame record's (one frame, its references), not a transition's.
  int frame_stack = 0;

  // The environment `env` (a MakeEnvironment() name) observing as
  // `observation`, n-step transitions with `n_step` and `gamma`, a Q-network
  // with `hidden_sizes` (rl::NetworkOptionsFor()), `payload_pad_bytes` after
  // each transition's encoding. InvalidArgument for an unknown environment,
  // an observation it lacks or bad sizes.
  static absl::StatusOr<ActorLayout> Compute(const std::string& env,
                                             rl::ObservationMode observation, int n_step,
                                             double gamma, const std::vector<int>& hidden_sizes,
                                             size_t payload_pad_bytes = 0, int frame_stack = 0);

  // The JSON object of the file comment, on one line (no newline).
  std::string ToJson() const;
};

// OK when the configuration a server publishes fits an actor with `layout`
// and `actor_index`: the same transition spec (a server that publishes none
// is not checked, with a warning), observation size and action count (where
// published), a slot that holds the payload, and room for the actor id.
// FailedPrecondition saying what differs otherwise (for the slot, the
// --slot_size the server needs).
absl::Status CheckServerConfig(const protocol::LayoutConfig& config, const ActorLayout& layout,
                               int actor_index);

}  // namespace dreplay::actor

#endif  // DREPLAY_ACTOR_CLIENT_ACTOR_LAYOUT_H_
