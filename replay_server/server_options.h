// Copyright dreplay authors.
//
// server_options.h: what a ReplayServer (server.h) is started with: where it
// listens, the geometry and replay loop, the credentials of each role,
// checkpoints, and the intervals of its housekeeping.
//
// Plain values; Validate() names the first bad field and its value.

#ifndef DREPLAY_REPLAY_SERVER_SERVER_OPTIONS_H_
#define DREPLAY_REPLAY_SERVER_SERVER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "protocol/handshake.h"
#include "protocol/layout.h"
#include "replay_server/replay_core.h"
#include "verbs/verbs.h"

namespace dreplay::server {

// The longest housekeeping_interval (heartbeats and dropped clients are
// handled at least this often).
inline constexpr absl::Duration kMaxHousekeepingInterval = absl::Seconds(1);

// The default period of checkpoints with a checkpoint directory: a crash
// loses at most about this much ingest (plus the write in progress), and a
// ring of a few GiB is written in a small share of it.
inline constexpr absl::Duration kDefaultCheckpointInterval = absl::Minutes(5);

struct ReplayServerOptions {
  // Where to listen; port 0: the OS picks one (see ReplayServer::port()).
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  // Geometry of every region, published in the control block. max_actors
  // bounds the actor ids the server accepts.
  protocol::LayoutConfig layout;
  // The replay loop: memory (alpha, sampling mode, seed), ingest, sampler
  // (beta schedule), update timeout, idle back-off, stats refresh.
  ReplayCoreOptions core;
  // Credentials (protocol/handshake.h's challenge-response: a client proves
  // it holds its role's token with an HMAC over a server nonce; the token
  // never crosses the wire). A role's token is its own one if set, else
  // auth_token (one token for every role). A role left without a token
  // while another role has one is refused. The actors' token is a master:
  // an actor proves protocol::ActorCredential(master, its id), never the
  // master itself, so it cannot claim another actor's id. Each token set is
  // at least protocol::kMinAuthTokenBytes long. All empty: no
  // authentication; replay_server then refuses to start unless --insecure.
  std::string auth_token;
  std::string actor_token;
  std::string learner_token;
  std::string monitor_token;
  // The token `role` must prove ("" when it has none).
  const std::string& TokenFor(protocol::Role role) const;
  // The HMAC key a client of `role` proves: TokenFor(role), except for an
  // actor: its credential derived from the actors' token ("" when none).
  std::string KeyFor(protocol::Role role, uint32_t actor_id) const;
  // True when any token is set.
  bool authenticated() const;
  // Connections held at most. Each role has its own share, so that no role
  // crowds out another: every actor lease (layout.leases) and one learner
  // always find room, and monitors hold at most max_monitors. REQUIRES
  // (Validate): max_clients >= layout.leases + 1 + max_monitors.
  uint32_t max_clients = 1024;
  uint32_t max_monitors = 16;
  // Where checkpoints go ("<dir>/replay.ckpt", older ones
  // "<dir>/replay.ckpt.1" ...); created if missing. Empty: no checkpoints.
  std::string checkpoint_dir;
  // Checkpoints kept, newest first, in [1, kMaxCheckpointKeep]: a restart
  // falls back to an older one when a newer one is damaged.
  uint32_t checkpoint_keep = 1;
  // Periodic checkpoints, with a checkpoint_dir (unused without one).
  // Infinite: only at Stop and on request, so a crash (SIGKILL, power loss)
  // loses everything ingested since the start. The default bounds that loss
  // to about one interval plus one write; shorter costs more disk bandwidth
  // (each checkpoint writes the whole slot ring). The core pauses only for
  // the cut (a copy of 16 bytes per slot); a thread writes the rest.
  absl::Duration checkpoint_interval = kDefaultCheckpointInterval;
  // One-line stats summary in the log (infinite: never).
  absl::Duration stats_interval = absl::Seconds(10);
  // How often each client's heartbeat word is written.
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // The accept thread wakes up at least this often for its housekeeping.
  absl::Duration housekeeping_interval = absl::Milliseconds(20);
  // Options of the queue pairs the server accepts. (The soft provider applies
  // the connecting side's link model; the server has none of its own.)
  verbs::QueuePairOptions qp;

  // OK, or InvalidArgument naming the bad field and value.
  absl::Status Validate() const;
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_SERVER_OPTIONS_H_
