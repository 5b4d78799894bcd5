// Copyright dreplay authors.

#include "replay_server/checkpoint/server_checkpoints.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dreplay::server {

absl::Status ServerCheckpointsOptions::Validate() const {
  if (dir.empty()) return absl::InvalidArgumentError("ServerCheckpointsOptions.dir is empty");
  if (keep < 1 || keep > kMaxCheckpointKeep) {
    return absl::InvalidArgumentError(absl::StrCat("ServerCheckpointsOptions.keep=", keep,
                                                   " must be in [1, ", kMaxCheckpointKeep, "]"));
  }
  if (interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ServerCheckpointsOptions.interval=", absl::FormatDuration(interval), " must be > 0"));
  }
  return absl::OkStatus();
}

ServerCheckpoints::ServerCheckpoints(const ServerCheckpointsOptions& options,
                                     ReplayRegions* regions, ReplayCore* core)
    : options_(options), regions_(regions), core_(core) {}

ServerCheckpoints::~ServerCheckpoints() = default;

absl::StatusOr<std::unique_ptr<ServerCheckpoints>> ServerCheckpoints::Open(
    const ServerCheckpointsOptions& options, ReplayRegions* regions, ReplayCore* core) {
  RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<ServerCheckpoints> c(new ServerCheckpoints(options, regions, core));
  CheckpointStoreOptions store;
  store.dir = options.dir;
  store.keep = options.keep;
  store.file_system = options.file_system;
  ASSIGN_OR_RETURN(c->store_, CheckpointStore::Open(store));
  c->checkpoint_path_ = c->store_->LatestPath();
  RETURN_IF_ERROR(c->RestoreNewest());
  RETURN_IF_ERROR(c->RecordStart());
  RETURN_IF_ERROR(c->ReserveSequences());
  ServerCheckpoints* self = c.get();
  c->writer_ = std::make_unique<CheckpointWriter>(
      [self](CheckpointCut* cut) { return self->WriteThroughStore(cut); },
      regions->config().capacity);
  c->last_checkpoint_ = absl::Now();
  return c;
}

absl::Status ServerCheckpoints::RestoreNewest() {
  absl::Status newest_failure;
  for (const std::string& path : store_->Candidates()) {
    const absl::Status status = core_->RestoreCheckpoint(path, options_.file_system);
    if (status.ok()) {
      restored_ = true;
      restored_path_ = path;
      LOG(INFO) << "restored checkpoint " << path << " (written by incarnation "
                << core_->restored_incarnation() << "): " << core_->memory().size()
                << " transitions, ingest cursor " << core_->ingest_cursor() << ", epoch "
                << core_->epoch() << ", incarnation " << core_->incarnation();
      return absl::OkStatus();
    }
    const absl::Status named = absl::Status(
        status.code(), absl::StrCat("cannot restore checkpoint ", path, ": ", status.message(),
                                    " (move the file away to start empty)"));
    // A damaged file: an older one may load. Anything else (another layout,
    // an I/O error) would fail the same way for every file.
    if (!absl::IsDataLoss(status)) return named;
    LOG(WARNING) << named.message() << "; trying the checkpoint before it";
    if (newest_failure.ok()) newest_failure = named;
  }
  return newest_failure;  // OK when there was no checkpoint
}

absl::Status ServerCheckpoints::RecordStart() {
  const absl::StatusOr<std::optional<StartRecord>> last = store_->ReadStartRecord();
  if (!last.ok()) {
    LOG(WARNING) << last.status().message() << "; it is replaced";
  } else if (last->has_value()) {
    const StartRecord& previous = **last;
    if (previous.incarnation != core_->restored_incarnation()) {
      LOG(WARNING) << "the last server on " << options_.dir << " (incarnation "
                   << previous.incarnation << ", epoch " << previous.epoch
                   << ") wrote no checkpoint this server could restore: what it ingested after "
                   << (restored_ ? absl::StrCat("checkpoint ", restored_path_)
                                 : std::string("its start"))
                   << " is lost";
    }
    core_->StartEpochAfter(previous.epoch);
  }
  return store_->WriteStartRecord({core_->incarnation(), core_->epoch()});
}

absl::Status ServerCheckpoints::ReserveSequences() {
  const protocol::LayoutConfig& config = regions_->config();
  SequenceReservationsOptions options;
  options.path = (std::filesystem::path(options_.dir) / SequenceReservations::kFileName).string();
  options.leases = config.leases;
  options.lease_slots = protocol::LeaseSlots(config);
  options.file_system = options_.file_system;
  ASSIGN_OR_RETURN(reservations_, SequenceReservations::Open(options));
  RETURN_IF_ERROR(CheckRestoredCursors(options.path));
  RETURN_IF_ERROR(core_->UseSequenceReservations(reservations_.get()));
  if (core_->sequences_skipped_after_restart() > 0) {
    LOG(INFO) << "sequences_skipped_after_restart " << core_->sequences_skipped_after_restart()
              << ": leases resume above every sequence the last server may have handed out";
  }
  return absl::OkStatus();
}

// Every server writes the reservations before its first checkpoint (Open
// reserves before it returns) and syncs each mark before the cursors pass
// it, so a restored checkpoint comes with a file whose marks are at or above
// its cursors. Without the file no number of skipped laps is provably safe:
// the last server may have run for any time after the checkpoint.
absl::Status ServerCheckpoints::CheckRestoredCursors(const std::string& path) const {
  if (!restored_) return absl::OkStatus();
  if (!reservations_->loaded()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", restored_path_, " was restored but ", path,
        " is missing: the leases could reuse sequences the last server handed out. Put the "
        "file back, or move the replay.ckpt* files out of ",
        options_.dir, " to start empty (every actor's lease starts over)"));
  }
  const std::vector<uint64_t> cursors = core_->lease_cursors();
  for (uint32_t l = 0; l < cursors.size(); ++l) {
    if (cursors[l] > reservations_->floor(l)) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint ", restored_path_, " has lease ", l, " at cursor ", cursors[l],
                       ", above its mark ", reservations_->floor(l), " in ", path,
                       ": the two files do not belong together (move away the one that does not)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckpointWriteStats> ServerCheckpoints::WriteThroughStore(CheckpointCut* cut) {
  CheckpointWriteStats stats;
  RETURN_IF_ERROR(store_->Save([&](const std::string& path) -> absl::Status {
    ASSIGN_OR_RETURN(stats, WriteCheckpoint(path, *regions_, cut, options_.file_system));
    return absl::OkStatus();
  }));
  return stats;
}

void ServerCheckpoints::NoteWritten(const CheckpointWriter::Result& result) {
  if (!result.ok()) {
    failed_.fetch_add(1, std::memory_order_relaxed);
    LOG(ERROR) << "checkpoint failed: " << result.status();
    return;
  }
  core_->mutable_checkpoint_pauses()->RecordWritten(result->cut_time + result->write_time,
                                                    result->bytes);
  core_->CheckpointWritten();
  {
    MutexLock lock(&mu_);
    last_written_ = *result;
  }
  LOG(INFO) << "checkpoint written to " << checkpoint_path_ << ": " << result->Summary();
}

bool ServerCheckpoints::TakeResult() {
  std::optional<CheckpointWriter::Result> result = writer_->TakeResult();
  if (!result.has_value()) return false;
  NoteWritten(*result);
  return true;
}

void ServerCheckpoints::Tick(absl::Time now) {
  CheckpointPauses* pauses = core_->mutable_checkpoint_pauses();
  if (in_progress_) {
    const absl::Duration cpu = ThreadCpuTime();
    pauses->RecordLoopGap(now - last_tick_, cpu - last_tick_cpu_);
    last_tick_cpu_ = cpu;
  }
  last_tick_ = now;
  if (core_->checkpoint_cut_in_progress()) {
    std::optional<CheckpointCut> cut = core_->ContinueCheckpoint();
    if (!cut.has_value()) return;
    const CheckpointStepTimer timer;
    writer_->Start(*std::move(cut));  // the writer streams the slots
    timer.Record(pauses, CheckpointStep::kHandOver);
    return;
  }
  if (in_progress_) {
    const CheckpointStepTimer timer;
    if (!TakeResult()) return;  // still writing
    timer.Record(pauses, CheckpointStep::kResult);
    pauses->Publish();  // once per checkpoint: the core never waits on a scrape per iteration
    in_progress_ = false;
    last_checkpoint_ = now;
  }
  // The cut's buffers come prepared from the writer thread (at its start,
  // then the last cut's): a cut that allocated its own would fault in 16
  // bytes per entry in one step.
  if (!writer_->spare_ready()) return;
  // A plain load first: the loop passes here on every iteration.
  const bool requested = requested_.load(std::memory_order_relaxed) &&
                         requested_.exchange(false, std::memory_order_acq_rel);
  if (!requested && now - last_checkpoint_ < options_.interval) return;
  if (requested) LOG(INFO) << "writing the requested checkpoint";
  core_->BeginCheckpoint(writer_->TakeSpare());
  in_progress_ = true;
  last_tick_cpu_ = ThreadCpuTime();
}

absl::Status ServerCheckpoints::Stop(bool final_checkpoint) {
  writer_->WaitIdle();  // the write in progress finishes first
  TakeResult();
  in_progress_ = false;
  if (!final_checkpoint) return absl::OkStatus();
  CheckpointCut cut = core_->CutCheckpoint(writer_->TakeSpare());
  const absl::StatusOr<CheckpointWriteStats> stats = WriteThroughStore(&cut);
  if (!stats.ok()) {
    failed_.fetch_add(1, std::memory_order_relaxed);
    LOG(ERROR) << "final checkpoint failed: " << stats.status();
    return stats.status();
  }
  NoteWritten(*stats);
  core_->mutable_checkpoint_pauses()->Publish();
  LOG(INFO) << "final checkpoint: " << core_->memory().size() << " transitions, ingest cursor "
            << core_->ingest_cursor();
  // No client is left and the core has stopped: the exact cursors let the
  // next start skip nothing.
  if (const absl::Status s = reservations_->WriteExact(core_->lease_cursors()); !s.ok()) {
    LOG(WARNING) << "sequence reservations kept at their marks: " << s;
  }
  return absl::OkStatus();
}

std::optional<CheckpointWriteStats> ServerCheckpoints::last_written() const {
  MutexLock lock(&mu_);
  return last_written_;
}

}  // namespace dreplay::server
