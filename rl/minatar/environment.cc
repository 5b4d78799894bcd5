// Copyright dreplay authors.

#include "rl/minatar/environment.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rl/minatar/asterix.h"
#include "rl/minatar/breakout.h"
#include "rl/minatar/freeway.h"
#include "rl/minatar/seaquest.h"
#include "rl/minatar/space_invaders.h"

namespace dreplay::rl::minatar {

absl::Status Options::Validate() const {
  if (!(sticky_action_prob >= 0.0 && sticky_action_prob <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sticky_action_prob must be in [0, 1], got ", sticky_action_prob));
  }
  return absl::OkStatus();
}

std::vector<std::string> Environment::Names() {
  return {"MinAtar/Asterix", "MinAtar/Breakout", "MinAtar/Freeway", "MinAtar/Seaquest",
          "MinAtar/SpaceInvaders"};
}

Environment::Environment(std::string name, const Options& options)
    : name_(std::move(name)), options_(options) {
  const bool ramping = options.difficulty_ramping;
  if (name_ == "MinAtar/Asterix") {
    game_ = std::make_unique<Asterix>(&random_, ramping);
  } else if (name_ == "MinAtar/Breakout") {
    game_ = std::make_unique<Breakout>(&random_);
  } else if (name_ == "MinAtar/Freeway") {
    game_ = std::make_unique<Freeway>(&random_);
  } else if (name_ == "MinAtar/Seaquest") {
    game_ = std::make_unique<Seaquest>(&random_, ramping);
  } else {
    CHECK_EQ(name_, "MinAtar/SpaceInvaders");
    game_ = std::make_unique<SpaceInvaders>(&random_, ramping);
  }
  // The games' constructors reset them, which draws; start from a clean
  // stream as documented.
  random_.Seed(0);
  game_->Reset();
}

absl::StatusOr<std::unique_ptr<Environment>> Environment::Create(absl::string_view name,
                                                                 const Options& options) {
  const std::vector<std::string> names = Names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown MinAtar game \"", name, "\"; known: ", absl::StrJoin(names, ", ")));
  }
  if (absl::Status status = options.Validate(); !status.ok()) return status;
  return std::unique_ptr<Environment>(new Environment(std::string(name), options));
}

absl::StatusOr<Outcome> Environment::Act(int action) {
  if (action < 0 || action >= kActionCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("action ", action, " is outside [0, ", kActionCount, ")"));
  }
  if (random_.Rand() < options_.sticky_action_prob) action = last_action_;
  last_action_ = action;
  return game_->Act(action);
}

std::vector<uint8_t> Environment::State() const {
  std::vector<uint8_t> state(state_size());
  game_->WriteState(absl::MakeSpan(state));
  return state;
}

}  // namespace dreplay::rl::minatar
