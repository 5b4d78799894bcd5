// Copyright dreplay authors.

#include "testing/session_options.h"

#include "protocol/auth.h"

namespace dreplay::testing {

client::ClientSessionOptions TestSessionOptions(const std::string& host, uint16_t port,
                                                protocol::Role role, uint32_t actor_id,
                                                const std::string& auth_token,
                                                absl::Duration patience, absl::Duration retry_max) {
  client::ClientSessionOptions o;
  o.host = host;
  o.port = port;
  o.role = role;
  o.actor_id = actor_id;
  o.auth_token = role == protocol::Role::kActor && !auth_token.empty()
                     ? protocol::ActorCredential(auth_token, actor_id)
                     : auth_token;
  o.insecure = auth_token.empty();
  o.connect_deadline = patience;
  o.retry_initial = absl::Milliseconds(5);
  o.retry_max = retry_max;
  o.op_timeout = patience;
  return o;
}

}  // namespace dreplay::testing
