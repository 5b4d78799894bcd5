// Copyright dreplay authors.
//
// server.h: the replay service of a buffer node.
//
// ReplayServer puts a ReplayCore (replay_core.h) behind a verbs listener:
//
//   * It allocates the regions (ReplayRegions, page-aligned), restores the
//     newest checkpoint of checkpoint_dir that loads (checkpoint_store.h:
//     a damaged one is skipped for the one before it; a new epoch, after
//     any epoch the directory's start record says a crashed server ran;
//     clients that reconnect are accepted as new), records its own start,
//     and
//     registers every region once, without remote access. A client's keys
//     are memory windows bound to its own queue pair (verbs.h BindWindow),
//     with its role's rights (protocol/README.md's access table;
//     protocol/handshake.h's RoleAccess) over its role's range (an actor:
//     its lease's slots and commit words, its own line): refused on any
//     other connection, fresh for each, gone with it. They reach the client
//     over its queue pair (protocol/key_grant.h).
//   * An accept thread answers handshakes: it answers a challenge request
//     with a fresh nonce (challenge_table.h), checks the hello (version, the
//     nonce, the HMAC of the role's token in constant time, role, actor id)
//     before anything is allocated for the client, and replies with a directory of
//     only the keys that role may use, or rejects with a reason the client
//     sees. At most one learner at a time: a second one is refused with a
//     retryable reason while the first is alive. Each actor is granted a
//     lease (lease_table.h): the one its actor id held before, whose
//     previous connection is closed first, or a free one; refused when all
//     are held. Its directory holds keys for that lease alone and the
//     sequence to resume at. The thread also keeps the
//     accepted queue pairs, WRITEs each client's heartbeat word now and then
//     (protocol/handshake.h) and drops clients whose queue pair failed, and keeps the
//     stats region's connection line current. Nothing a peer sends during a
//     handshake can disturb the server or the other clients.
//   * A learner connection is handed to the core (ReplayCore::
//     NoteLearnerConnected, an atomic word) and answered only once the core
//     has applied it: it forgets the previous learner's holdings
//     (transfer-once, learner_cache.h) first.
//   * A core thread runs the replay loop (ingest, priority updates,
//     sampling) with the core's idle back-off. With checkpoint_dir its
//     checkpoint flow is ServerCheckpoints (server_checkpoints.h): restore
//     at start, a checkpoint every checkpoint_interval and when one is
//     requested (RequestCheckpoint, the binary's SIGUSR1), its cut taken in
//     chunks between the core's steps (incremental_cut.h) and streamed by
//     the checkpoint writer thread (checkpoint_writer.h) while the core goes
//     on, the newest checkpoint_keep files kept, the final one at Stop; the
//     core's checkpoint steps and loop gaps are recorded
//     (checkpoint_pauses()). It logs a one-line summary every
//     stats_interval, and warns (at most every 10 s) when the learner's
//     priority records are invalid (invalid_priorities.h).
//
//   ReplayServerOptions options;
//   options.layout = ...;  // capacity, slot_size, batch_size, ...
//   ASSIGN_OR_RETURN(auto server, ReplayServer::Start(provider.get(), options));
//   LOG(INFO) << "listening on " << server->address();
//   ...
//   RETURN_IF_ERROR(server->Stop());  // final checkpoint
//
// Stop() closes the listener and every client's queue pair, lets the core
// ingest what was committed, stops it and writes the final checkpoint.
//
// Thread safety: Start, Stop and the accessors may be called from any
// thread; Stop is idempotent and the destructor calls it.

#ifndef DREPLAY_REPLAY_SERVER_SERVER_H_
#define DREPLAY_REPLAY_SERVER_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/log_limiter.h"
#include "common/mutex.h"
#include "protocol/handshake.h"
#include "protocol/layout.h"
#include "replay_server/challenge_table.h"
#include "replay_server/checkpoint/server_checkpoints.h"
#include "replay_server/delays.h"
#include "replay_server/invalid_priorities.h"
#include "replay_server/key_grant_sender.h"
#include "replay_server/lease_table.h"
#include "replay_server/regions.h"
#include "replay_server/replay_core.h"
#include "replay_server/server_options.h"
#include "verbs/verbs.h"

namespace dreplay::server {

// Challenges (server nonces) outstanding at most, in all and per source
// host, and how long one is good (challenge_table.h).
inline constexpr size_t kMaxOutstandingChallenges = 4096;
inline constexpr size_t kMaxChallengesPerSource = 64;
inline constexpr absl::Duration kChallengeLifetime = absl::Seconds(30);
// Refused connections logged at most, per interval (the rest are counted,
// and the next line logged says how many were held back).
inline constexpr uint32_t kRefusalLogLines = 10;
inline constexpr absl::Duration kRefusalLogInterval = absl::Seconds(10);

// Connection counts, as in the stats region's connection line.
struct ConnectionCounts {
  uint64_t actors = 0;
  uint64_t learners = 0;
  uint64_t monitors = 0;
  uint64_t total = 0;     // connections accepted since start
  uint64_t rejected = 0;  // handshakes refused since start
  // Connections accepted since start, by role (they add up to total).
  uint64_t actors_accepted = 0;
  uint64_t learners_accepted = 0;
  uint64_t monitors_accepted = 0;
};

class ReplayServer {
 public:
  // Validates options, allocates and registers the regions, restores a
  // checkpoint if checkpoint_dir holds one, listens and starts both threads.
  // `provider` is not owned and must outlive the server. Errors:
  // InvalidArgument (options), FailedPrecondition / DataLoss (a checkpoint
  // that does not match the options or is damaged: named with its path),
  // the provider's errors (registration, listen).
  static absl::StatusOr<std::unique_ptr<ReplayServer>> Start(verbs::Provider* provider,
                                                             const ReplayServerOptions& options);
  ~ReplayServer();
  ReplayServer(const ReplayServer&) = delete;
  ReplayServer& operator=(const ReplayServer&) = delete;

  // Stops accepting, closes every client's queue pair, drains ingest, joins
  // both threads and writes the final checkpoint (when checkpoint_dir is
  // set). Blocks. Idempotent: later calls return the first call's status.
  absl::Status Stop();

  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  std::string address() const;  // "host:port"
  const protocol::LayoutConfig& config() const { return regions_->config(); }
  // The epoch this server runs (1 fresh, saved + 1 after a restore).
  uint64_t epoch() const { return epoch_; }
  // True if Start restored a checkpoint.
  bool restored() const { return checkpoints_ != nullptr && checkpoints_->restored(); }
  // The file Start restored ("" when none).
  const std::string& restored_path() const {
    return checkpoints_ != nullptr ? checkpoints_->restored_path() : no_path_;
  }
  // "<checkpoint_dir>/replay.ckpt", or "" without checkpoint_dir.
  const std::string& checkpoint_path() const {
    return checkpoints_ != nullptr ? checkpoints_->checkpoint_path() : no_path_;
  }
  // The checkpoint flow (server_checkpoints.h); nullptr without
  // checkpoint_dir. Its const accessors are thread-safe.
  const ServerCheckpoints* checkpoints() const { return checkpoints_.get(); }
  // How long checkpoints held the core thread (thread-safe: Take()).
  const CheckpointPauses& checkpoint_pauses() const { return core_->checkpoint_pauses(); }

  // Thread-safe, does not block. Asks the core thread to write a checkpoint
  // at its next step (counted in checkpoints_written once written; a failure
  // is logged). FailedPrecondition without checkpoint_dir.
  absl::Status RequestCheckpoint();

  // A consistent copy of the stats region (what a monitor READs). Thread-safe.
  protocol::StatsBlock ReadStats() const;
  // Thread-safe.
  ConnectionCounts connections() const;
  // The core's delay histograms; thread-safe (take Snapshot()s).
  const ReplayDelays& delays() const { return core_->delays(); }
  const ReplayServerOptions& options() const { return options_; }

 private:
  struct Client;

  ReplayServer(verbs::Provider* provider, const ReplayServerOptions& options);
  absl::Status Init();
  absl::Status RegisterRegions();
  // Registers each actor's range of `kind` on its own (actor_range_mrs_).
  absl::Status RegisterActorRanges(protocol::RegionKind kind);
  // The part of region `kind` that `role` reaches: the whole region, or for
  // an actor its lease's slots and commit words and its own line. Offset
  // and length within the region; InternalError for a lease or actor id out
  // of range.
  absl::Status RangeFor(protocol::Role role, protocol::RegionKind kind, uint32_t actor_id,
                        uint32_t lease, uint64_t* offset, uint64_t* length) const;
  // The accept reply's directory: the ranges of the role, without keys.
  absl::StatusOr<protocol::RegionDirectory> DirectoryFor(const protocol::Hello& hello,
                                                         uint32_t lease, uint64_t resume) const;
  // Binds a window on the client's queue pair for every region of
  // `accepted` with the role's rights, and WRITEs the keys into the
  // client's grant region (protocol/key_grant.h).
  // The grant's slot is the client's from the start (ForgetClient returns
  // it), also when this fails.
  absl::Status GrantKeys(Client* client, const protocol::Hello& hello,
                         const protocol::RegionDirectory& accepted);
  // Destroys the client's queue pair, then returns its grant slot and
  // releases its lease. Idempotent.
  void ForgetClient(Client* client);

  // Says at start which roles authenticate with which token (never the
  // token); a warning when there is none.
  void LogCredentials() const;

  void AcceptLoop();
  void HandleConnection(std::unique_ptr<verbs::PendingConnection> pending);
  // Refuses with `reason`; logs it, at most kRefusalLogLines per
  // kRefusalLogInterval (a flood must not fill the log disk).
  void Reject(verbs::PendingConnection* pending, const std::string& reason);
  // Answers a challenge request with a fresh nonce (a refusal, by design).
  void IssueChallenge(verbs::PendingConnection* pending);
  // OK when the hello names a live challenge issued to `source` (the peer's
  // host) and carries the MAC of its key (ReplayServerOptions::KeyFor); the
  // refusal reason otherwise.
  absl::Status Authenticate(const protocol::Hello& hello, const std::string& source);
  // The reason to refuse `hello` retryably because its role has no room: a
  // learner is connected, the actor's id is connected, monitors are at
  // max_monitors. nullopt: room. Counts only the living (runs Housekeeping
  // before it refuses).
  std::optional<std::string> RoleIsFull(const protocol::Hello& hello);
  std::optional<std::string> RoleIsFullNow(const protocol::Hello& hello) const;
  // Drops failed clients and writes due heartbeats; the accept loop runs it
  // once per housekeeping_interval.
  void Housekeeping(absl::Time now);
  void PublishConnections();

  void CoreLoop();
  void MaybeLogStats(absl::Time now);

  verbs::Provider* const provider_;
  const ReplayServerOptions options_;

  // Constant after Start.
  std::unique_ptr<ReplayRegions> regions_;
  std::unique_ptr<ReplayCore> core_;
  std::string host_;
  uint16_t port_ = 0;
  uint64_t epoch_ = 0;
  const std::string no_path_;
  std::unique_ptr<verbs::Listener> listener_;
  // One registration per region, without remote access: peers reach it only
  // through windows bound to their own queue pair (GrantKeys); index:
  // RegionKind.
  std::unique_ptr<verbs::MemoryRegion> region_mrs_[protocol::kNumRegionKinds];
  // The ranges an actor is granted (its lease's slots and commit words, its
  // actors line), each registered again on its own, without remote access:
  // an actor's windows are bound over these, so the device refuses what lies
  // outside them even where it checks a window key against the region under
  // the window rather than the window (rxe: docs/roce.md). Index: the lease
  // (slots, commit words) or the actor id (actors line).
  std::vector<std::unique_ptr<verbs::MemoryRegion>> actor_range_mrs_[protocol::kNumRegionKinds];
  // Source of the heartbeat WRITEs (its clock, refreshed before each round).
  std::unique_ptr<uint64_t[]> heartbeat_word_;
  std::unique_ptr<verbs::MemoryRegion> heartbeat_mr_;

  // Owned by the accept thread. The grant sender outlives the clients.
  std::unique_ptr<KeyGrantSender> grants_;
  std::unique_ptr<LeaseTable> leases_;
  ChallengeTable challenges_{ChallengeTableOptions{kMaxOutstandingChallenges,
                                                   kMaxChallengesPerSource, kChallengeLifetime}};
  LogLimiter refusal_log_{kRefusalLogLines, kRefusalLogInterval};
  std::vector<std::unique_ptr<Client>> clients_;
  uint64_t next_client_id_ = 1;
  absl::Time last_heartbeat_ = absl::InfinitePast();
  absl::Time last_housekeeping_ = absl::InfinitePast();

  // Written by the accept thread, read by anyone.
  std::atomic<uint64_t> connections_total_{0};
  std::atomic<uint64_t> connections_rejected_{0};
  std::atomic<uint64_t> accepted_by_role_[3] = {};  // index: role - Role::kActor

  // Owned by the core thread.
  absl::Time last_stats_log_;
  ReplayCounters last_logged_;
  InvalidPriorityWarnings invalid_priorities_;

  // With checkpoint_dir: start, periodic, requested and final checkpoints
  // (its writer thread reads the regions and writes files only). Destroyed
  // before the core and the regions.
  std::unique_ptr<ServerCheckpoints> checkpoints_;

  bool started_ = false;  // both threads were started (Start succeeded)
  std::atomic<bool> stop_accepting_{false};
  std::atomic<bool> stop_core_{false};
  std::thread accept_thread_;
  std::thread core_thread_;

  Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
  absl::Status stop_status_ ABSL_GUARDED_BY(stop_mu_);
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_SERVER_H_
