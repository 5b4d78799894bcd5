// Copyright dreplay authors.
//
// make_environment.h: creates an environment by its name: the Gymnasium name
// of a classic-control task, or "MinAtar/<Game>" (rl/minatar_games.h).
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

namespace dreplay::rl {

// The names MakeEnvironment() accepts, sorted.
std::vector<std::string> EnvironmentNames();

// A new environment of the given name (exact match, e.g. "CartPole-v1").
// NOT_FOUND, naming the known environments, for any other name.
absl::StatusOr<std::unique_ptr<Environment>> MakeEnvironment(absl::string_view name);

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_MAKE_ENVIRONMENT_H_
