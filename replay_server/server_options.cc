// Copyright dreplay authors.

#include "replay_server/server_options.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "replay_server/checkpoint_store.h"

namespace dreplay::server {
namespace {

absl::Status PositiveDuration(const char* name, absl::Duration d) {
  if (d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReplayServerOptions.", name, "=", absl::FormatDuration(d), " must be > 0"));
  }
  return absl::OkStatus();
}

}  // namespace

const std::string& ReplayServerOptions::TokenFor(protocol::Role role) const {
  const std::string* own = nullptr;
  switch (role) {
    case protocol::Role::kActor:
      own = &actor_token;
      break;
    case protocol::Role::kLearner:
      own = &learner_token;
      break;
    case protocol::Role::kMonitor:
      own = &monitor_token;
      break;
  }
  return own != nullptr && !own->empty() ? *own : auth_token;
}

bool ReplayServerOptions::authenticated() const {
  return !auth_token.empty() || !actor_token.empty() || !learner_token.empty() ||
         !monitor_token.empty();
}

absl::Status ReplayServerOptions::Validate() const {
  if (host.empty()) return absl::InvalidArgumentError("ReplayServerOptions.host is empty");
  RETURN_IF_ERROR(layout.Validate());
  RETURN_IF_ERROR(core.Validate());
  if (core.memory.capacity != 0 && core.memory.capacity != layout.capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReplayServerOptions.core.memory.capacity=", core.memory.capacity,
                     " differs from capacity=", layout.capacity));
  }
  for (const auto& [name, token] :
       {std::pair<const char*, const std::string*>{"auth_token", &auth_token},
        {"actor_token", &actor_token},
        {"learner_token", &learner_token},
        {"monitor_token", &monitor_token}}) {
    if (token->size() > protocol::kMaxAuthTokenBytes) {
      return absl::InvalidArgumentError(absl::StrCat("ReplayServerOptions.", name, " is ",
                                                     token->size(), " bytes, more than ",
                                                     protocol::kMaxAuthTokenBytes));
    }
  }
  if (max_clients == 0)
    return absl::InvalidArgumentError("ReplayServerOptions.max_clients=0 must be >= 1");
  RETURN_IF_ERROR(PositiveDuration("checkpoint_interval", checkpoint_interval));
  if (checkpoint_keep < 1 || checkpoint_keep > kMaxCheckpointKeep) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReplayServerOptions.checkpoint_keep=", checkpoint_keep, " must be in [1, ",
                     kMaxCheckpointKeep, "]"));
  }
  RETURN_IF_ERROR(PositiveDuration("stats_log_interval", stats_log_interval));
  RETURN_IF_ERROR(PositiveDuration("heartbeat_interval", heartbeat_interval));
  RETURN_IF_ERROR(PositiveDuration("housekeeping_interval", housekeeping_interval));
  if (housekeeping_interval > kMaxHousekeepingInterval) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReplayServerOptions.housekeeping_interval=", absl::FormatDuration(housekeeping_interval),
        " must be at most ", absl::FormatDuration(kMaxHousekeepingInterval)));
  }
  return qp.Validate();
}

}  // namespace dreplay::server
