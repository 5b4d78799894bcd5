// Copyright dreplay authors.
//
// retry.h: how a long-running client (an actor, the learner) rides out a
// server that is away -- restarting, or across a link that is down -- on top
// of the session's own reconnection.
//
//   RetryPolicy policy;
//   policy.connect_timeout = absl::Seconds(30);
//   policy.reconnect_timeout = absl::Seconds(60);
//   policy.stop = &signals.flag();
//   ASSIGN_OR_RETURN(auto session, ConnectWithRetry(provider, options, policy));
//   RETURN_IF_ERROR(RetryWhileDisconnected(policy, [&] { return writer->Flush(); }));
//
// The clients (experience writer, batch reader, ...) reconnect through the
// session when their queue pair fails, each attempt bounded by the session's
// connect_deadline; when that fails too they return a connection failure
// (IsConnectionFailure()). RetryWhileDisconnected runs the operation again,
// backing off, until it succeeds, fails otherwise, reconnect_timeout has
// passed or a stop is requested. ConnectWithRetry does the same for the
// first connection, up to connect_timeout.
//
// Each attempt of the session is kept short (attempt_deadline, which
// ConnectWithRetry gives the session as its connect_deadline) so that a stop
// request is noticed; the loops here wait up to the timeouts.
//
// Both block (they sleep between attempts) and log each retry. Thread
// safety: as thread-safe as the operation they run.

#ifndef DREPLAY_CLIENT_RETRY_H_
#define DREPLAY_CLIENT_RETRY_H_

#include <atomic>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/session.h"
#include "verbs/verbs.h"

namespace dreplay::client {

struct RetryPolicy {
  // How long the first connection is tried (the binaries' --connect_timeout_s).
  absl::Duration connect_timeout = absl::Seconds(30);
  // How long an operation is retried while the server is unreachable (the
  // binaries' --reconnect_timeout_s).
  absl::Duration reconnect_timeout = absl::Seconds(60);
  // The session's connect_deadline: one (re)connection attempt.
  absl::Duration attempt_deadline = absl::Seconds(2);
  // Back-off between retries: doubles from initial up to max.
  absl::Duration backoff_initial = absl::Milliseconds(100);
  absl::Duration backoff_max = absl::Seconds(2);
  // Not owned; when set and true, no further retry is made. May be null.
  const std::atomic<bool>* stop = nullptr;

  // OK, or InvalidArgument naming the bad field and value.
  absl::Status Validate() const;
};

// Connects (blocking) with `options`, its connect_deadline replaced by
// policy.attempt_deadline, again while the server is unreachable
// (Unavailable, DeadlineExceeded) until policy.connect_timeout has passed or
// a stop is requested. A refusal (PermissionDenied) or a mismatch
// (FailedPrecondition) is final; InvalidArgument for a policy that fails
// Validate(). `provider` is not owned and must outlive the session.
absl::StatusOr<std::unique_ptr<ClientSession>> ConnectWithRetry(verbs::Provider* provider,
                                                                const ClientSessionOptions& options,
                                                                const RetryPolicy& policy);

// Runs `op` until it succeeds or fails with something else than a
// connection failure, again while IsConnectionFailure() (see the file
// comment); returns its last status.
absl::Status RetryStatusWhileDisconnected(const RetryPolicy& policy,
                                          absl::FunctionRef<absl::Status()> op);

// The same for an `op` that returns absl::Status or absl::StatusOr<T>;
// returns its last result.
template <typename Op>
auto RetryWhileDisconnected(const RetryPolicy& policy, Op&& op) -> decltype(op()) {
  std::optional<decltype(op())> result;
  // The status is also the result's own.
  RetryStatusWhileDisconnected(policy, [&]() -> absl::Status {
    result.emplace(op());
    if constexpr (std::is_same_v<decltype(op()), absl::Status>) {
      return *result;
    } else {
      return result->status();
    }
  }).IgnoreError();
  return *std::move(result);
}

// One attempt of `op` (absl::Status or absl::StatusOr<T>) on `session`, and
// when it fails with a connection failure, Reconnect() from the generation
// the attempt was made on and one attempt more; returns the last result, or
// Reconnect()'s error. The clients' rule for their own blocking operations
// (a READ on a failed queue pair fails again: reconnect first);
// RetryWhileDisconnected backs off and retries from there.
//
//   return WithReconnect(session_, [&] { return TryPublish(); });
template <typename Op>
auto WithReconnect(ClientSession* session, Op&& op) -> decltype(op()) {
  const uint64_t generation = session->generation();
  decltype(op()) result = op();
  absl::Status status;
  if constexpr (std::is_same_v<decltype(op()), absl::Status>) {
    status = result;
  } else {
    status = result.status();
  }
  if (status.ok() || !IsConnectionFailure(status)) return result;
  const absl::Status reconnected = session->Reconnect(generation, status);
  if (!reconnected.ok()) return reconnected;
  return op();
}

}  // namespace dreplay::client

#endif  // DREPLAY_CLIENT_RETRY_H_
