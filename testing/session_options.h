// Copyright dreplay authors.
//
// session_options.h: client session options for tests: a server's address
// and a role, with quick retries and a bounded patience, so that a test
// fails in bounded time instead of hanging.
//
//   auto options = testing::TestSessionOptions(host, port, Role::kLearner);

#ifndef DREPLAY_TESTING_SESSION_OPTIONS_H_
#define DREPLAY_TESTING_SESSION_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "client/session.h"
#include "protocol/handshake.h"

namespace dreplay::testing {

// Connects within `patience` (connect deadline and blocking operations),
// retrying every 5 ms at first and at most every `retry_max`. `auth_token`
// is the server's token of the role; for an actor the session proves the
// credential derived from it for `actor_id` (protocol::ActorCredential), as
// an operator would hand out. Empty: insecure (a server without tokens).
client::ClientSessionOptions TestSessionOptions(const std::string& host, uint16_t port,
                                                protocol::Role role, uint32_t actor_id = 0,
                                                const std::string& auth_token = "",
                                                absl::Duration patience = absl::Seconds(10),
                                                absl::Duration retry_max = absl::Milliseconds(50));

}  // namespace dreplay::testing

#endif  // DREPLAY_TESTING_SESSION_OPTIONS_H_
