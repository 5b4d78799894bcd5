// Copyright dreplay authors.

#include "client/retry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"

namespace dreplay::client {
namespace {

bool StopRequested(const RetryPolicy& policy) {
  return policy.stop != nullptr && policy.stop->load();
}

// Runs `op` again while `transient` says its status may pass, backing off,
// until the policy's `timeout` has passed or a stop is requested.
template <typename Transient>
absl::Status RetryFor(const RetryPolicy& policy, absl::Duration timeout, Transient transient,
                      bool log_retries, absl::FunctionRef<absl::Status()> op) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = policy.backoff_initial;
  while (true) {
    const absl::Status status = op();
    if (status.ok() || !transient(status) || absl::Now() + backoff > deadline ||
        StopRequested(policy)) {
      return status;
    }
    if (log_retries) {
      LOG(WARNING) << "server unreachable (" << status << "); retrying in "
                   << absl::FormatDuration(backoff);
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, policy.backoff_max);
  }
}

}  // namespace

absl::Status RetryPolicy::Validate() const {
  const auto positive = [](const char* field, absl::Duration d) -> absl::Status {
    if (d > absl::ZeroDuration()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("RetryPolicy.", field, " = ", absl::FormatDuration(d), " must be > 0"));
  };
  for (const auto& [field, d] : {std::pair{"connect_timeout", connect_timeout},
                                 std::pair{"reconnect_timeout", reconnect_timeout},
                                 std::pair{"attempt_deadline", attempt_deadline},
                                 std::pair{"backoff_initial", backoff_initial}}) {
    const absl::Status s = positive(field, d);
    if (!s.ok()) return s;
  }
  if (backoff_max < backoff_initial) {
    return absl::InvalidArgumentError(
        absl::StrCat("RetryPolicy.backoff_max = ", absl::FormatDuration(backoff_max),
                     " is below backoff_initial = ", absl::FormatDuration(backoff_initial)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ClientSession>> ConnectWithRetry(verbs::Provider* provider,
                                                                const ClientSessionOptions& options,
                                                                const RetryPolicy& policy) {
  const absl::Status valid = policy.Validate();
  if (!valid.ok()) return valid;
  ClientSessionOptions attempt = options;
  attempt.connect_deadline = policy.attempt_deadline;
  absl::StatusOr<std::unique_ptr<ClientSession>> session;
  const auto unreachable = [](const absl::Status& s) {
    return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
  };
  // The status is also the session's own.
  RetryFor(policy, policy.connect_timeout, unreachable, /*log_retries=*/false, [&] {
    session = ClientSession::Connect(provider, attempt);
    return session.status();
  }).IgnoreError();
  return session;
}

absl::Status RetryStatusWhileDisconnected(const RetryPolicy& policy,
                                          absl::FunctionRef<absl::Status()> op) {
  return RetryFor(policy, policy.reconnect_timeout, &IsConnectionFailure, /*log_retries=*/true, op);
}

}  // namespace dreplay::client
