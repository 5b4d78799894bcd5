// Copyright dreplay authors.
//
// The parts of the accept thread that decide who is admitted before anything
// is allocated: challenges, authentication, refusals and what the server
// says at start about its credentials (server.h). The connection itself is
// set up in server.cc (HandleConnection).

#include <string>

#include "absl/strings/str_cat.h"
#include "common/peer_address.h"
#include "glog/logging.h"
#include "replay_server/server.h"

namespace dreplay::server {

void ReplayServer::LogCredentials() const {
  if (!options_.authenticated()) {
    LOG(WARNING) << "insecure: no token given, so any client that reaches " << address()
                 << " may take any role and any actor id (give --auth_token_file or per-role "
                    "token files)";
    return;
  }
  for (protocol::Role role :
       {protocol::Role::kActor, protocol::Role::kLearner, protocol::Role::kMonitor}) {
    const bool own = &options_.TokenFor(role) != &options_.auth_token;
    if (options_.TokenFor(role).empty()) {
      LOG(WARNING) << "no token for the " << protocol::RoleName(role)
                   << " role: " << protocol::RoleName(role) << "s are refused";
    } else if (role == protocol::Role::kActor) {
      LOG(INFO) << "actors authenticate with their own credentials, derived from "
                << (own ? "the actors' token" : "the shared token")
                << " (actor_credentials writes them)";
    } else {
      LOG(INFO) << protocol::RoleName(role) << "s authenticate with "
                << (own ? "their own role's token" : "the shared token");
    }
  }
}

void ReplayServer::Reject(verbs::PendingConnection* pending, const std::string& reason) {
  connections_rejected_.fetch_add(1, std::memory_order_relaxed);
  uint64_t held_back = 0;
  if (refusal_log_.Allow(absl::Now(), &held_back)) {
    LOG(WARNING) << "refused connection from " << pending->peer() << ": " << reason
                 << LogLimiter::HeldBackNote(held_back);
  }
  pending->Reject(reason);
}

void ReplayServer::IssueChallenge(verbs::PendingConnection* pending) {
  absl::StatusOr<protocol::Nonce> nonce = challenges_.Issue(SourceOf(pending->peer()), absl::Now());
  if (!nonce.ok()) {
    LOG(ERROR) << "cannot issue a challenge: " << nonce.status();
    Reject(pending, "internal server error (see the server's log)");
    return;
  }
  pending->Reject(protocol::ChallengeReason(*nonce));
}

absl::Status ReplayServer::Authenticate(const protocol::Hello& hello, const std::string& source) {
  // The nonce goes first and in any case: a hello is good once.
  if (!challenges_.Consume(hello.server_nonce, source, absl::Now())) {
    return absl::PermissionDeniedError(
        protocol::RetryableReason("authentication failed: unknown, used or expired challenge"));
  }
  if (!options_.authenticated()) return absl::OkStatus();
  const std::string key = options_.KeyFor(hello.role, hello.actor_id);
  if (key.empty()) {
    return absl::PermissionDeniedError(absl::StrCat("authentication failed: this server admits no ",
                                                    protocol::RoleName(hello.role)));
  }
  if (!protocol::CheckHelloMac(hello, key)) {
    return absl::PermissionDeniedError(
        hello.role == protocol::Role::kActor
            ? absl::StrCat("authentication failed: not the credential of actor ", hello.actor_id)
            : std::string("authentication failed"));
  }
  return absl::OkStatus();
}

}  // namespace dreplay::server
