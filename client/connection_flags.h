// Copyright dreplay authors.
//
// connection_flags.h: the flags every client binary (actor, learner,
// replay_top) takes to reach the replay server -- --server, the provider
// flags, --link, --auth_token and --auth_token_file -- as plain values that
// main() copies from its flags, turned into the provider's and the
// session's options in one place. Takes values, never reads flags.
//
//   ConnectionFlags flags;
//   flags.server = FLAGS_server;
//   ...
//   ASSIGN_OR_RETURN(ConnectionOptions c, ConnectionOptionsFromFlags(flags, Role::kLearner));
//   ASSIGN_OR_RETURN(auto provider, verbs::CreateProvider(c.provider));
//   ASSIGN_OR_RETURN(auto session, ClientSession::Connect(provider.get(), c.session));
//
// Thread safety: plain values and a pure function.

#ifndef DREPLAY_CLIENT_CONNECTION_FLAGS_H_
#define DREPLAY_CLIENT_CONNECTION_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/session.h"
#include "common/flag_values.h"
#include "protocol/handshake.h"
#include "verbs/options.h"
#include "verbs/provider_flags.h"

namespace dreplay::client {

// The flags' values; the defaults are the flags' defaults.
struct ConnectionFlags {
  std::string server;             // --server: HOST:PORT, required
  verbs::ProviderFlags provider;  // --provider, --ib_device, --ib_port, --gid_index
  std::string link = "none";      // --link: verbs::ParseLinkModel()'s names
  std::string auth_token;         // --auth_token
  std::string auth_token_file;    // --auth_token_file
  bool insecure = false;          // --insecure: no token, the server unproven
  // Whether a token file without a token is accepted (as no token).
  EmptyTokenFile empty_token_file = EmptyTokenFile::kAllowed;
};

struct ConnectionOptions {
  verbs::ProviderOptions provider;
  // host, port, qp.link, role, actor_id and auth_token from the flags; the
  // rest as ClientSessionOptions' defaults, for the caller to adjust.
  ClientSessionOptions session;
};

// The options for a client of `role` (an actor: with `actor_id`). Reads the
// token file. InvalidArgument naming the bad flag and its value
// ("--server=x: ...", "--link=x: ...", ...).
absl::StatusOr<ConnectionOptions> ConnectionOptionsFromFlags(const ConnectionFlags& flags,
                                                             protocol::Role role,
                                                             uint32_t actor_id = 0);

}  // namespace dreplay::client

#endif  // DREPLAY_CLIENT_CONNECTION_FLAGS_H_
