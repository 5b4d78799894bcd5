// Copyright dreplay authors.

#include "rl/make_environment.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rl/acrobot.h"
#include "rl/cartpole.h"
#include "rl/minatar_games.h"
#include "rl/mountain_car.h"

namespace dreplay::rl {

std::vector<std::string> EnvironmentNames() {
  std::vector<std::string> names = {Acrobot::kName, CartPole::kName, MountainCar::kName};
  for (const std::string& name : MinAtar::Names()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::unique_ptr<Environment>> MakeEnvironment(absl::string_view name,
                                                             ObservationMode mode) {
  if (mode != ObservationMode::kNative && !absl::StartsWith(name, "MinAtar/")) {
    return absl::InvalidArgumentError(absl::StrCat("observation ", ObservationModeName(mode),
                                                   " is for MinAtar environments only, not \"",
                                                   name, "\" (use native)"));
  }
  if (name == CartPole::kName) return std::make_unique<CartPole>();
  if (name == Acrobot::kName) return std::make_unique<Acrobot>();
  if (name == MountainCar::kName) return std::make_unique<MountainCar>();
  if (absl::StartsWith(name, "MinAtar/")) {
    absl::StatusOr<std::unique_ptr<MinAtar>> env = MinAtar::Create(name, {}, mode);
    if (env.ok()) return std::unique_ptr<Environment>(*std::move(env));
  }
  return absl::NotFoundError(absl::StrCat("unknown environment \"", name,
                                          "\"; known: ", absl::StrJoin(EnvironmentNames(), ", ")));
}

}  // namespace dreplay::rl
