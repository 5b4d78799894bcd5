// Copyright dreplay authors.
//
// network_flags.h: the --observation and --hidden flags that every binary
// with a Q-network shares (actor, learner, evaluate_snapshots), turned into
// values. Flags themselves stay in each main.
//
//   ASSIGN_OR_RETURN(rl::ObservationMode mode, rl::ObservationFlag(FLAGS_observation));
//   ASSIGN_OR_RETURN(std::vector<int> hidden, rl::HiddenFlag(FLAGS_hidden, FLAGS_env, mode));
//
// Thread safety: pure functions.

#ifndef DREPLAY_RL_NETWORK_FLAGS_H_
#define DREPLAY_RL_NETWORK_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rl/minatar_games.h"

namespace dreplay::rl {

// --observation: "native" or "pixels84". InvalidArgument
// "--observation=<value>: ..." naming the choices otherwise.
absl::StatusOr<ObservationMode> ObservationFlag(const std::string& value);

// --hidden: a comma-separated list of sizes, or, when empty, the default of
// the network for `env` observed as `mode` (DefaultHiddenSizes: 64,64 for
// classic control, 128 for MinAtar's grid, 512 for pixels84).
// InvalidArgument naming the flag for a bad list, or --env and
// --observation when they make no environment (pixels84 on CartPole-v1).
absl::StatusOr<std::vector<int>> HiddenFlag(const std::string& value, const std::string& env,
                                            ObservationMode mode);

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_NETWORK_FLAGS_H_
