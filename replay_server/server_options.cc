// Copyright dreplay authors.

#include "replay_server/server_options.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "protocol/auth.h"
#include "replay_server/checkpoint/checkpoint_store.h"

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

std::string ReplayServerOptions::KeyFor(protocol::Role role, uint32_t actor_id) const {
  const std::string& token = TokenFor(role);
  if (role != protocol::Role::kActor || token.empty()) return token;
  return protocol::ActorCredential(token, actor_id);
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
    if (!token->empty() && token->size() < protocol::kMinAuthTokenBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("ReplayServerOptions.", name, " is ", token->size(), " bytes, fewer than ",
                       protocol::kMinAuthTokenBytes, " (make one with: openssl rand -hex 32)"));
    }
  }
  const uint64_t reserved = uint64_t{layout.leases} + 1 + max_monitors;
  if (max_clients < reserved) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReplayServerOptions.max_clients=", max_clients, " must be at least leases (",
        layout.leases, ") + 1 learner + max_monitors (", max_monitors, ") = ", reserved));
  }
  RETURN_IF_ERROR(PositiveDuration("checkpoint_interval", checkpoint_interval));
  if (checkpoint_keep < 1 || checkpoint_keep > kMaxCheckpointKeep) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReplayServerOptions.checkpoint_keep=", checkpoint_keep, " must be in [1, ",
                     kMaxCheckpointKeep, "]"));
  }
  RETURN_IF_ERROR(PositiveDuration("stats_interval", stats_interval));
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
