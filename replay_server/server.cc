// Copyright dreplay authors.

#include "replay_server/server.h"

#include <pthread.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/peer_address.h"
#include "common/shared_words.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "protocol/key_grant.h"
#include "replay_server/key_grant_sender.h"

namespace dreplay::server {

// The handshake's access table is handed to the provider as it is.
static_assert(uint32_t{protocol::kAccessRead} == uint32_t{verbs::kRemoteRead}, "");
static_assert(uint32_t{protocol::kAccessWrite} == uint32_t{verbs::kRemoteWrite}, "");
static_assert(uint32_t{protocol::kAccessAtomic} == uint32_t{verbs::kRemoteAtomic}, "");
namespace {

// Steps the core takes at Stop to ingest what was committed, at most.
constexpr int kMaxDrainSteps = 100000;
constexpr int kPollBatch = 8;
// How long the accept thread waits for the core to apply a learner connection
// (one core step, or a periodic checkpoint) before refusing it retryably.
constexpr absl::Duration kLearnerNoteTimeout = absl::Seconds(5);
// How long binding a client's windows and posting its grant may wait for
// room in a small send queue (key_grant_sender.h).
constexpr absl::Duration kGrantPostTimeout = absl::Seconds(2);
// At most one warning about invalid priority records per this long.
constexpr absl::Duration kInvalidPriorityWarningInterval = absl::Seconds(10);

// Index of a role in per-role arrays: actor 0, learner 1, monitor 2.
uint32_t RoleIndex(protocol::Role role) {
  return static_cast<uint32_t>(role) - static_cast<uint32_t>(protocol::Role::kActor);
}

double PerSecond(uint64_t delta, absl::Duration elapsed) {
  const double seconds = absl::ToDoubleSeconds(elapsed);
  return seconds > 0 ? static_cast<double>(delta) / seconds : 0.0;
}

}  // namespace

struct ReplayServer::Client {
  uint64_t id = 0;
  protocol::Role role = protocol::Role::kActor;
  uint32_t actor_id = 0;
  uint32_t lease = protocol::kNoLease;  // actors: the lease it holds
  std::string peer;
  // The slot of the grant WRITEn to the client (GrantKeys), released by
  // ForgetClient once `qp` is gone.
  std::optional<KeyGrantSender::Slot> grant_slot;
  std::unique_ptr<verbs::QueuePair> qp;
  protocol::WireRegion heartbeat;  // length 0: none offered
  bool heartbeat_outstanding = false;
  uint64_t heartbeats = 0;

  std::string Name() const {
    return role == protocol::Role::kActor ? absl::StrCat("actor ", actor_id, " (", peer, ")")
                                          : absl::StrCat(protocol::RoleName(role), " (", peer, ")");
  }
};

ReplayServer::ReplayServer(verbs::Provider* provider, const ReplayServerOptions& options)
    : provider_(provider),
      options_(options),
      invalid_priorities_(kInvalidPriorityWarningInterval) {}

absl::StatusOr<std::unique_ptr<ReplayServer>> ReplayServer::Start(
    verbs::Provider* provider, const ReplayServerOptions& options) {
  if (provider == nullptr) return absl::InvalidArgumentError("ReplayServer needs a provider");
  RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<ReplayServer> server(new ReplayServer(provider, options));
  RETURN_IF_ERROR(server->Init());
  return server;
}

absl::Status ReplayServer::Init() {
  ASSIGN_OR_RETURN(regions_, ReplayRegions::Create(options_.layout));
  ASSIGN_OR_RETURN(core_, ReplayCore::Create(regions_.get(), options_.core));

  if (!options_.checkpoint_dir.empty()) {
    ServerCheckpointsOptions checkpoints;
    checkpoints.dir = options_.checkpoint_dir;
    checkpoints.keep = options_.checkpoint_keep;
    checkpoints.interval = options_.checkpoint_interval;
    ASSIGN_OR_RETURN(checkpoints_,
                     ServerCheckpoints::Open(checkpoints, regions_.get(), core_.get()));
  }
  epoch_ = core_->epoch();

  RETURN_IF_ERROR(RegisterRegions());
  ASSIGN_OR_RETURN(grants_, KeyGrantSender::Create(provider_, options_.max_clients));
  leases_ = std::make_unique<LeaseTable>(regions_.get());
  for (uint32_t l = 0; l < config().leases; ++l) {
    leases_->NoteSkippedLaps(l, core_->resume_skipped_laps(l));
  }

  ASSIGN_OR_RETURN(listener_, provider_->Listen(options_.host, options_.port));
  host_ = options_.host;
  port_ = listener_->port();
  PublishConnections();

  last_stats_log_ = absl::Now();
  last_logged_ = core_->counters();
  invalid_priorities_.Baseline(core_->counters());
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  core_thread_ = std::thread([this] { CoreLoop(); });
  // Visible in top and perf (at most 15 bytes; a longer name is refused,
  // which is harmless).
  pthread_setname_np(accept_thread_.native_handle(), "replay-accept");
  pthread_setname_np(core_thread_.native_handle(), "replay-core");
  started_ = true;
  LOG(INFO) << "replay server listening on " << address() << " (" << provider_->name()
            << " provider, epoch " << epoch_ << "): " << config().DebugString();
  // The split is static: a lone actor of many leases sees a small memory.
  LOG(INFO) << config().leases << " actor leases of " << protocol::LeaseSlots(config())
            << " slots each: an actor keeps at most that many transitions (set --leases "
               "to the number of actors to give each a larger share)";
  LogCredentials();
  return absl::OkStatus();
}

absl::Status ReplayServer::RegisterRegions() {
  heartbeat_word_.reset(new uint64_t[protocol::kCacheLine / sizeof(uint64_t)]());
  // The heartbeat carries the epoch: constant, so the source never changes
  // while WRITEs read it.
  heartbeat_word_[0] = epoch_;
  ASSIGN_OR_RETURN(
      heartbeat_mr_,
      provider_->RegisterMemory(heartbeat_word_.get(), protocol::kCacheLine, verbs::kLocalWrite));
  for (uint32_t k = 0; k < protocol::kNumRegionKinds; ++k) {
    const auto kind = static_cast<protocol::RegionKind>(k);
    void* addr = regions_->region(kind);
    const uint64_t bytes = regions_->region_bytes(kind);
    if (addr == nullptr || bytes == 0) continue;
    // Roles other than actors get windows over whole regions, and devices
    // bind no window longer than kMaxDeviceWindowBytes (mlx5).
    if (provider_->name() == "ibverbs" && bytes > verbs::kMaxDeviceWindowBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "region ", protocol::RegionKindName(kind), " is ", bytes, " bytes, longer than the ",
          verbs::kMaxDeviceWindowBytes,
          " a device can grant in one memory window: lower --capacity (or --slot_size, "
          "--param_bytes)"));
    }
    // No remote access: a region key is never sent; windows carry it.
    ASSIGN_OR_RETURN(
        region_mrs_[k],
        provider_->RegisterMemory(addr, bytes, verbs::kLocalWrite | verbs::kMemoryWindowBind));
    RETURN_IF_ERROR(RegisterActorRanges(kind));
  }
  return absl::OkStatus();
}

absl::Status ReplayServer::RegisterActorRanges(protocol::RegionKind kind) {
  const protocol::LayoutConfig& c = config();
  uint32_t count = 0;
  if (kind == protocol::RegionKind::kSlots || kind == protocol::RegionKind::kCommits) {
    count = c.leases;
  } else if (kind == protocol::RegionKind::kActors) {
    count = c.max_actors;
  }
  auto* base = static_cast<char*>(regions_->region(kind));
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t offset = 0;
    uint64_t length = 0;
    RETURN_IF_ERROR(
        RangeFor(protocol::Role::kActor, kind, /*actor_id=*/i, /*lease=*/i, &offset, &length));
    ASSIGN_OR_RETURN(std::unique_ptr<verbs::MemoryRegion> mr,
                     provider_->RegisterMemory(base + offset, length,
                                               verbs::kLocalWrite | verbs::kMemoryWindowBind));
    actor_range_mrs_[static_cast<uint32_t>(kind)].push_back(std::move(mr));
  }
  return absl::OkStatus();
}

absl::Status ReplayServer::RangeFor(protocol::Role role, protocol::RegionKind kind,
                                    uint32_t actor_id, uint32_t lease, uint64_t* offset,
                                    uint64_t* length) const {
  const protocol::LayoutConfig& c = config();
  *offset = 0;
  *length = regions_->region_bytes(kind);
  if (role != protocol::Role::kActor) return absl::OkStatus();
  if (kind == protocol::RegionKind::kSlots || kind == protocol::RegionKind::kCommits) {
    // The lease's own range: the provider refuses a WRITE anywhere else.
    if (lease >= c.leases) {
      return absl::InternalError(absl::StrCat("lease ", lease, " out of range"));
    }
    const uint64_t base = protocol::LeaseBase(c, lease);
    const uint64_t unit = kind == protocol::RegionKind::kSlots ? c.slot_size : sizeof(uint64_t);
    *offset = base * unit;
    *length = protocol::LeaseSlots(c) * unit;
  } else if (kind == protocol::RegionKind::kActors) {
    if (actor_id >= c.max_actors) {
      return absl::InternalError(absl::StrCat("actor_id ", actor_id, " has no line"));
    }
    *offset = protocol::ActorLineOffset(actor_id);
    *length = sizeof(protocol::ActorLine);
  }
  return absl::OkStatus();
}

absl::StatusOr<protocol::RegionDirectory> ReplayServer::DirectoryFor(const protocol::Hello& hello,
                                                                     uint32_t lease,
                                                                     uint64_t resume) const {
  protocol::RegionDirectory directory;
  for (uint32_t k = 0; k < protocol::kNumRegionKinds; ++k) {
    const auto kind = static_cast<protocol::RegionKind>(k);
    // A region the role may not use is left out (a buffer-placement
    // learner gets no slot, commit-word or journal range).
    if (!protocol::RoleNeedsRegion(hello.role, kind, config(), hello.learner_placement)) continue;
    if (region_mrs_[k] == nullptr) {
      return absl::InternalError(
          absl::StrCat("region ", protocol::RegionKindName(kind), " is not registered"));
    }
    uint64_t offset = 0;
    uint64_t length = 0;
    RETURN_IF_ERROR(RangeFor(hello.role, kind, hello.actor_id, lease, &offset, &length));
    const uint64_t base = reinterpret_cast<uint64_t>(regions_->region(kind));
    directory.Set(kind, protocol::WireRegion{base + offset, length, 0, 0});
  }
  directory.lease = lease;
  directory.resume_sequence = resume;
  return directory;
}

absl::Status ReplayServer::GrantKeys(Client* client, const protocol::Hello& hello,
                                     const protocol::RegionDirectory& accepted) {
  const absl::Time deadline = absl::Now() + kGrantPostTimeout;
  ASSIGN_OR_RETURN(const KeyGrantSender::Slot slot, grants_->Take());
  client->grant_slot = slot;  // released with the client
  const KeyGrantSender::BindFor bind_for =
      [&](protocol::RegionKind kind) -> absl::StatusOr<KeyGrantSender::Bind> {
    const auto k = static_cast<uint32_t>(kind);
    const uint64_t base = reinterpret_cast<uint64_t>(regions_->region(kind));
    KeyGrantSender::Bind bind;
    bind.mr = region_mrs_[k].get();
    bind.offset = accepted.Get(kind).addr - base;
    const std::vector<std::unique_ptr<verbs::MemoryRegion>>& ranges = actor_range_mrs_[k];
    if (hello.role == protocol::Role::kActor && !ranges.empty()) {
      const uint32_t index =
          kind == protocol::RegionKind::kActors ? hello.actor_id : accepted.lease;
      if (index >= ranges.size()) {
        return absl::InternalError(absl::StrCat("no registered range ", index, " of region ",
                                                protocol::RegionKindName(kind)));
      }
      bind.mr = ranges[index].get();
      bind.offset = accepted.Get(kind).addr - reinterpret_cast<uint64_t>(bind.mr->addr());
    }
    bind.access = protocol::RoleAccess(hello.role, kind, hello.learner_placement);
    return bind;
  };
  ASSIGN_OR_RETURN(const protocol::RegionDirectory granted,
                   grants_->BindWindows(client->qp.get(), accepted, bind_for, deadline));
  *grants_->message(slot) =
      protocol::MakeKeyGrant(options_.KeyFor(hello.role, hello.actor_id), hello, granted);
  return grants_->Send(client->qp.get(), slot, hello.grant, deadline);
}

void ReplayServer::ForgetClient(Client* client) {
  const bool connected = client->qp != nullptr;
  client->qp.reset();  // destroyed: nothing it sends is placed any more
  if (client->grant_slot.has_value()) grants_->Release(*client->grant_slot);
  client->grant_slot.reset();
  if (connected && client->lease != protocol::kNoLease) leases_->Release(client->id);
}

ReplayServer::~ReplayServer() {
  const absl::Status status = Stop();
  if (!status.ok()) LOG(ERROR) << "replay server stop: " << status;
  // Registrations go before the memory they cover.
  for (uint32_t k = 0; k < protocol::kNumRegionKinds; ++k) {
    actor_range_mrs_[k].clear();
    region_mrs_[k].reset();
  }
  heartbeat_mr_.reset();
}

std::string ReplayServer::address() const { return absl::StrCat(host_, ":", port_); }

// ---------------------------------------------------------------------------
// Accept thread.

void ReplayServer::AcceptLoop() {
  while (!stop_accepting_.load(std::memory_order_acquire)) {
    // Waits no longer than until the next housekeeping round is due.
    const absl::Duration until_due = std::max(
        absl::ZeroDuration(), last_housekeeping_ + options_.housekeeping_interval - absl::Now());
    absl::StatusOr<std::unique_ptr<verbs::PendingConnection>> pending =
        listener_->Accept(until_due);
    if (pending.ok()) {
      HandleConnection(std::move(*pending));
    } else if (absl::IsCancelled(pending.status())) {
      break;
    } else if (!absl::IsDeadlineExceeded(pending.status())) {
      LOG(WARNING) << "accept: " << pending.status();
      absl::SleepFor(options_.housekeeping_interval);
    }
    // Once per interval, not per accept: a round polls every client, and
    // after each of 1,024 accepts that would be quadratic.
    const absl::Time now = absl::Now();
    if (now - last_housekeeping_ >= options_.housekeeping_interval) Housekeeping(now);
    PublishConnections();
  }
}

void ReplayServer::HandleConnection(std::unique_ptr<verbs::PendingConnection> pending) {
  if (protocol::IsChallengeRequest(pending->payload())) {
    IssueChallenge(pending.get());
    return;
  }
  absl::StatusOr<protocol::Hello> hello = protocol::DecodeHello(pending->payload());
  if (!hello.ok()) {
    Reject(pending.get(), std::string(hello.status().message()));
    return;
  }
  const absl::Status auth = Authenticate(*hello, SourceOf(pending->peer()));
  if (!auth.ok()) {
    Reject(pending.get(), absl::StrCat(protocol::RoleName(hello->role), ": ", auth.message()));
    return;
  }
  const uint32_t max_actors = config().max_actors;
  if (hello->role == protocol::Role::kActor && max_actors > 0 && hello->actor_id >= max_actors) {
    Reject(pending.get(), absl::StrCat("actor_id ", hello->actor_id,
                                       " is out of range: the server has max_actors=", max_actors));
    return;
  }
  if (std::optional<std::string> full = RoleIsFull(*hello); full.has_value()) {
    Reject(pending.get(), protocol::RetryableReason(*full));
    return;
  }
  if (hello->role == protocol::Role::kLearner) {
    // The core forgets the previous learner's holdings (and drops batches
    // that reference them) before this learner can READ anything.
    const uint64_t generation = core_->NoteLearnerConnected(hello->learner_cache);
    if (!core_->WaitLearnerNoted(generation, kLearnerNoteTimeout)) {
      Reject(pending.get(), protocol::RetryableReason("the replay core is busy; try again"));
      return;
    }
  }
  uint32_t lease = protocol::kNoLease;
  uint64_t resume = 0;
  if (hello->role == protocol::Role::kActor) {
    absl::StatusOr<uint32_t> granted = leases_->Acquire(hello->actor_id);
    if (!granted.ok()) {
      Reject(pending.get(), protocol::RetryableReason(granted.status().message()));
      return;
    }
    lease = *granted;
    resume = leases_->ResumeSequence(lease);
  }
  absl::StatusOr<protocol::RegionDirectory> directory = DirectoryFor(*hello, lease, resume);
  if (!directory.ok()) {
    LOG(ERROR) << "cannot build a region directory: " << directory.status();
    Reject(pending.get(), "internal server error (see the server's log)");
    return;
  }
  if (lease != protocol::kNoLease) directory->resume_skipped_laps = leases_->SkippedLaps(lease);
  absl::StatusOr<std::unique_ptr<verbs::QueuePair>> qp = pending->Accept(
      protocol::EncodeAccept(
          *directory,
          protocol::AcceptProof(options_.KeyFor(hello->role, hello->actor_id), *hello, *directory)),
      options_.qp);
  if (!qp.ok()) {
    LOG(WARNING) << "accepting " << protocol::RoleName(hello->role) << " from " << pending->peer()
                 << " failed: " << qp.status();
    return;
  }
  auto client = std::make_unique<Client>();
  client->id = next_client_id_++;
  client->role = hello->role;
  client->actor_id = hello->actor_id;
  client->peer = pending->peer();
  client->qp = std::move(*qp);
  const absl::Status granted = GrantKeys(client.get(), *hello, *directory);
  if (!granted.ok()) {
    // The client waits for keys that never come and gives up; nothing was
    // granted, so no lease is bound.
    LOG(ERROR) << "granting keys to " << client->Name() << ": " << granted;
    ForgetClient(client.get());
    return;
  }
  client->heartbeat = hello->heartbeat;
  client->lease = lease;
  if (lease != protocol::kNoLease) leases_->Bind(lease, hello->actor_id, client->id);
  LOG(INFO) << "accepted " << client->Name() << " as client " << client->id
            << (lease != protocol::kNoLease
                    ? absl::StrCat(" with lease ", lease, " from sequence ", resume)
                    : "");
  clients_.push_back(std::move(client));
  accepted_by_role_[RoleIndex(hello->role)].fetch_add(1, std::memory_order_relaxed);
  connections_total_.fetch_add(1, std::memory_order_relaxed);
  PublishConnections();
}

std::optional<std::string> ReplayServer::RoleIsFull(const protocol::Hello& hello) {
  if (!RoleIsFullNow(hello).has_value()) return std::nullopt;
  // Count only the living: a client that just died must not block its
  // successor (a returning actor, the next learner). Only on a refusal: a
  // round polls every client.
  Housekeeping(absl::Now());
  return RoleIsFullNow(hello);
}

std::optional<std::string> ReplayServer::RoleIsFullNow(const protocol::Hello& hello) const {
  uint32_t same_role = 0;
  for (const auto& client : clients_) {
    if (client->role != hello.role) continue;
    ++same_role;
    if (hello.role == protocol::Role::kLearner) {
      return absl::StrCat("another learner is connected (", client->peer,
                          "); at most one learner at a time");
    }
    if (hello.role == protocol::Role::kActor && client->actor_id == hello.actor_id) {
      // Only the same identity takes a lease back, and only once its
      // previous connection is gone: a second hello never displaces it.
      return absl::StrCat("actor ", hello.actor_id, " is connected already (client ", client->id,
                          ", ", client->peer, "); its lease is held until that connection closes");
    }
  }
  if (hello.role == protocol::Role::kMonitor && same_role >= options_.max_monitors) {
    return absl::StrCat("the server holds its maximum of ", options_.max_monitors,
                        " monitors (--max_monitors)");
  }
  return std::nullopt;
}

void ReplayServer::Housekeeping(absl::Time now) {
  last_housekeeping_ = now;
  const bool heartbeat_due = now - last_heartbeat_ >= options_.heartbeat_interval;
  if (heartbeat_due) last_heartbeat_ = now;
  verbs::Completion completions[kPollBatch];
  for (auto& client : clients_) {
    absl::Status failure;
    int n;
    while (failure.ok() && (n = client->qp->Poll(absl::MakeSpan(completions))) > 0) {
      for (int i = 0; i < n; ++i) {
        if (!completions[i].ok()) {
          failure = completions[i].ToStatus();
          break;
        }
        client->heartbeat_outstanding = false;
      }
    }
    if (failure.ok() && client->qp->state() == verbs::QpState::kError) {
      failure = client->qp->error();
      if (failure.ok()) failure = absl::UnavailableError("queue pair failed");
    }
    if (failure.ok() && heartbeat_due && client->heartbeat.length > 0 &&
        !client->heartbeat_outstanding) {
      verbs::WorkRequest wr;
      wr.wr_id = ++client->heartbeats;
      wr.opcode = verbs::Opcode::kWrite;
      wr.signaled = true;
      wr.local = heartbeat_mr_.get();
      wr.local_addr = heartbeat_word_.get();
      wr.length = sizeof(uint64_t);
      wr.remote_addr = client->heartbeat.addr;
      wr.rkey = client->heartbeat.rkey;
      failure = client->qp->PostSend(absl::MakeConstSpan(&wr, 1));
      client->heartbeat_outstanding = failure.ok();
    }
    if (!failure.ok()) {
      LOG(INFO) << "dropped " << client->Name() << " (client " << client->id << "): " << failure;
      ForgetClient(client.get());
    }
  }
  clients_.erase(std::remove_if(clients_.begin(), clients_.end(),
                                [](const std::unique_ptr<Client>& c) { return c->qp == nullptr; }),
                 clients_.end());
}

void ReplayServer::PublishConnections() {
  uint64_t counts[3] = {0, 0, 0};
  for (const auto& client : clients_) {
    ++counts[RoleIndex(client->role)];
  }
  protocol::StatsBlock* s = regions_->stats();
  StoreRelaxed(&s->actors_connected, counts[0]);
  StoreRelaxed(&s->learners_connected, counts[1]);
  StoreRelaxed(&s->monitors_connected, counts[2]);
  StoreRelaxed(&s->connections_total, connections_total_.load(std::memory_order_relaxed));
  StoreRelaxed(&s->connections_rejected, connections_rejected_.load(std::memory_order_relaxed));
}

// ---------------------------------------------------------------------------
// Core thread.

void ReplayServer::CoreLoop() {
  const ReplayCoreOptions& o = options_.core;
  uint64_t idle_steps = 0;
  absl::Duration sleep = o.min_sleep;
  while (!stop_core_.load(std::memory_order_acquire)) {
    const StepResult result = core_->Step();
    const absl::Time now = absl::Now();
    if (checkpoints_ != nullptr) checkpoints_->Tick(now);
    MaybeLogStats(now);
    if (std::optional<std::string> warning = invalid_priorities_.Observe(core_->counters(), now)) {
      LOG(WARNING) << *warning;
    }
    if (result.did_work()) {
      idle_steps = 0;
      sleep = o.min_sleep;
      continue;
    }
    if (++idle_steps <= o.spin_steps) continue;
    absl::SleepFor(sleep);
    sleep = std::min(sleep * 2, o.max_sleep);
  }
  // Ingest what was committed before the clients were cut off.
  for (int i = 0; i < kMaxDrainSteps && core_->Step().did_work(); ++i) {
  }
  core_->PublishStats();
}

absl::Status ReplayServer::RequestCheckpoint() {
  if (checkpoints_ == nullptr) {
    return absl::FailedPreconditionError("checkpoint requested, but there is no checkpoint_dir");
  }
  checkpoints_->Request();
  return absl::OkStatus();
}

void ReplayServer::MaybeLogStats(absl::Time now) {
  const absl::Duration elapsed = now - last_stats_log_;
  if (elapsed < options_.stats_interval) return;
  const ReplayCounters& c = core_->counters();
  const ReplayCounters& p = last_logged_;
  const ConnectionCounts conn = connections();
  LOG(INFO) << absl::StrFormat(
      "stats: epoch=%d size=%d/%d inserts/s=%.1f samples/s=%.1f batches/s=%.1f "
      "samples/insert=%.2f limiter_waits=%d staged: payloads=%d cached=%d "
      "drops: overrun=%d torn=%d copy_rejects=%d stale_updates=%d "
      "invalid_updates=%d mailbox_rejects=%d updates_timed_out=%d "
      "clients: actors=%d learners=%d monitors=%d rejected=%d",
      core_->epoch(), core_->memory().size(), core_->memory().capacity(),
      PerSecond(c.inserted - p.inserted, elapsed), PerSecond(c.sampled - p.sampled, elapsed),
      PerSecond(c.batches_staged - p.batches_staged, elapsed),
      c.inserted > 0 ? static_cast<double>(c.sampled) / c.inserted : 0.0, c.limiter_sample_waits,
      c.staged_payloads, c.staged_cached, c.overrun_slots, c.torn_slots, c.sample_copy_rejects,
      c.priority_updates_stale, c.priority_updates_invalid, c.mailbox_rejects, c.updates_timed_out,
      conn.actors, conn.learners, conn.monitors, conn.rejected);
  last_logged_ = c;
  last_stats_log_ = now;
}

// ---------------------------------------------------------------------------

absl::Status ReplayServer::Stop() {
  MutexLock lock(&stop_mu_);
  if (stopped_) return stop_status_;
  stopped_ = true;
  stop_accepting_.store(true, std::memory_order_release);
  if (listener_ != nullptr) listener_->Shutdown();
  if (accept_thread_.joinable()) accept_thread_.join();
  // Cut every client off: nothing is written into the regions after this.
  clients_.clear();
  if (regions_ != nullptr) PublishConnections();
  stop_core_.store(true, std::memory_order_release);
  if (core_thread_.joinable()) core_thread_.join();
  // A server that never started must not overwrite the checkpoint it failed
  // to restore.
  if (checkpoints_ != nullptr) stop_status_ = checkpoints_->Stop(/*final_checkpoint=*/started_);
  listener_.reset();
  return stop_status_;
}

protocol::StatsBlock ReplayServer::ReadStats() const {
  const protocol::StatsBlock* s = regions_->stats();
  protocol::StatsBlock out;
  while (true) {
    const uint64_t end = LoadAcquire(&s->generation_end);
    CopyFromShared(&out, s, sizeof(protocol::StatsBlock));
    std::atomic_thread_fence(std::memory_order_acquire);
    if (LoadRelaxed(&s->generation_begin) == end) return out;
  }
}

ConnectionCounts ReplayServer::connections() const {
  const protocol::StatsBlock* s = regions_->stats();
  ConnectionCounts c;
  c.actors = LoadRelaxed(&s->actors_connected);
  c.learners = LoadRelaxed(&s->learners_connected);
  c.monitors = LoadRelaxed(&s->monitors_connected);
  c.total = LoadRelaxed(&s->connections_total);
  c.rejected = LoadRelaxed(&s->connections_rejected);
  c.actors_accepted = accepted_by_role_[0].load(std::memory_order_relaxed);
  c.learners_accepted = accepted_by_role_[1].load(std::memory_order_relaxed);
  c.monitors_accepted = accepted_by_role_[2].load(std::memory_order_relaxed);
  return c;
}

}  // namespace dreplay::server
