// Copyright dreplay authors.

#include "client/connection_flags.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "protocol/host_port.h"

namespace dreplay::client {

absl::StatusOr<ConnectionOptions> ConnectionOptionsFromFlags(const ConnectionFlags& flags,
                                                             protocol::Role role,
                                                             uint32_t actor_id) {
  ConnectionOptions c;
  ASSIGN_OR_RETURN(c.provider, verbs::ProviderOptionsFromFlags(flags.provider));
  if (flags.server.empty()) return FlagError("server", "", "is required (HOST:PORT)");
  {
    const absl::Status s = protocol::ParseHostPort(flags.server, &c.session.host, &c.session.port);
    if (!s.ok()) return FlagError("server", flags.server, s.message());
  }
  {
    absl::StatusOr<verbs::LinkModel> link = verbs::ParseLinkModel(flags.link);
    if (!link.ok()) return FlagError("link", flags.link, link.status().message());
    c.session.qp.link = *link;
  }
  RETURN_IF_ERROR(verbs::ApplyQueuePairFlags(flags.provider, &c.session.qp));
  c.session.role = role;
  c.session.actor_id = actor_id;
  ASSIGN_OR_RETURN(c.session.auth_token,
                   ReadAuthToken(flags.auth_token, flags.auth_token_file, flags.empty_token_file));
  c.session.insecure = flags.insecure;
  const absl::Status s = c.session.Validate();
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("bad flag: ", s.message()));
  return c;
}

}  // namespace dreplay::client
