// Copyright dreplay authors.
//
// make_environment.h: creates an environment by its name: the Gymnasium name
// of a classic-control task, or "MinAtar/<Game>" (rl/minatar_games.h), the
// latter natively or rendered (ObservationMode, --observation).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Environment> env,
//                    MakeEnvironment("Acrobot-v1"));

#ifndef DREPLAY_RL_MAKE_ENVIRONMENT_H_
#define DREPLAY_RL_MAKE_ENVIRONMENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rl/environment.h"
#include "rl/minatar_games.h"

namespace dreplay::rl {

// The names MakeEnvironment() accepts, sorted.
std::vector<std::string> EnvironmentNames();

// A new environment of the given name (exact match, e.g. "CartPole-v1")
// observing as `mode` says. NOT_FOUND, naming the known environments, for any
// other name; INVALID_ARGUMENT for pixels84 on an environment that is not
// MinAtar's (only MinAtar has a rendering).
absl::StatusOr<std::unique_ptr<Environment>> MakeEnvironment(
    absl::string_view name, ObservationMode mode = ObservationMode::kNative);

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_MAKE_ENVIRONMENT_H_
