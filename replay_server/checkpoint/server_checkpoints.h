// Copyright dreplay authors.
//
// server_checkpoints.h: the buffer node's checkpoint flow, from start to
// stop: what ReplayServer does with --checkpoint_dir.
//
//   ASSIGN_OR_RETURN(auto checkpoints,
//                    ServerCheckpoints::Open(options, regions.get(), core.get()));
//   // core thread, after each ReplayCore::Step():
//   checkpoints->Tick(absl::Now());
//   // any thread (SIGUSR1):
//   checkpoints->Request();
//   // once the core thread has stopped and no client is left:
//   RETURN_IF_ERROR(checkpoints->Stop(/*final_checkpoint=*/true));
//
// Start (Open): opens the directory's store (checkpoint_store.h), restores
// the newest checkpoint that loads (a damaged one is skipped for the one
// before it), skips any epoch the start record says a crashed server ran
// and records this start, opens the sequence reservations
// (sequence_reservations.h) and has the core publish under them, and
// starts the CheckpointWriter thread. A restored checkpoint without a
// reservations file, or with a lease cursor above its mark, is refused
// (FailedPrecondition naming both files): no skip computed from the
// checkpoint alone is provably safe.
//
// Periodic and requested checkpoints (Tick, on the core thread, once per
// loop iteration): every `interval`, or after Request(), the core begins a
// cut (ReplayCore::BeginCheckpoint); each later Tick copies one chunk of it
// (ContinueCheckpoint) and, after the last, hands the cut to the writer,
// which streams the ring to the file and rotates the older files; a later
// Tick takes the result (counted in checkpoints_written, logged). One
// checkpoint at a time: a request waits for the one in progress (and, at
// start, for the writer to prepare the cut's buffers). While one
// is in progress every Tick records the gap since the previous Tick, and
// the hand-over and the result's taking are timed as steps
// (ReplayCore::checkpoint_pauses()).
//
// Stop: waits for the write in progress, then (when asked) cuts and writes
// the final checkpoint on the caller's thread and writes the exact lease
// cursors as the reservation marks, so the next start skips nothing.
//
// Thread safety: Open and Stop on the thread that owns the server's start
// and stop, while the core thread is not running; Tick on the core thread;
// Request and the accessors from any thread.

#ifndef DREPLAY_REPLAY_SERVER_CHECKPOINT_SERVER_CHECKPOINTS_H_
#define DREPLAY_REPLAY_SERVER_CHECKPOINT_SERVER_CHECKPOINTS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "replay_server/checkpoint/checkpoint.h"
#include "replay_server/checkpoint/checkpoint_store.h"
#include "replay_server/checkpoint/checkpoint_writer.h"
#include "replay_server/checkpoint/file_system.h"
#include "replay_server/checkpoint/sequence_reservations.h"
#include "replay_server/regions.h"
#include "replay_server/replay_core.h"

namespace dreplay::server {

struct ServerCheckpointsOptions {
  // The checkpoint directory (created if missing). Not empty.
  std::string dir;
  // Checkpoints kept, newest first, in [1, kMaxCheckpointKeep].
  uint32_t keep = 1;
  // Periodic checkpoints (infinite: only requested ones and the final one).
  absl::Duration interval = absl::InfiniteDuration();
  // The file system (file_system.h), not owned; null: the process's POSIX
  // one. Tests pass one that simulates crashes and full disks.
  FileSystem* file_system = nullptr;

  absl::Status Validate() const;
};

class ServerCheckpoints {
 public:
  // See the file comment. `regions` and `core` are not owned and must
  // outlive this object. REQUIRES: no peer uses the regions yet. Errors:
  // InvalidArgument (options), FailedPrecondition / DataLoss (a checkpoint
  // or reservations file that does not match or is damaged, named with its
  // path), Internal (I/O).
  static absl::StatusOr<std::unique_ptr<ServerCheckpoints>> Open(
      const ServerCheckpointsOptions& options, ReplayRegions* regions, ReplayCore* core);
  ~ServerCheckpoints();
  ServerCheckpoints(const ServerCheckpoints&) = delete;
  ServerCheckpoints& operator=(const ServerCheckpoints&) = delete;

  // True if Open restored a checkpoint, and which file.
  bool restored() const { return restored_; }
  const std::string& restored_path() const { return restored_path_; }
  // "<dir>/replay.ckpt".
  const std::string& checkpoint_path() const { return checkpoint_path_; }
  const SequenceReservations& reservations() const { return *reservations_; }

  // Thread-safe, does not block: a checkpoint at the next Tick that finds
  // none in progress.
  void Request() { requested_.store(true, std::memory_order_release); }
  // Core thread, once per loop iteration (see the file comment). Never
  // blocks on I/O.
  void Tick(absl::Time now);
  // See the file comment. Blocks. Returns the final checkpoint's status
  // (OK when `final_checkpoint` is false).
  absl::Status Stop(bool final_checkpoint);

  // Thread-safe: the last checkpoint written (nullopt: none yet).
  std::optional<CheckpointWriteStats> last_written() const;
  // Thread-safe: checkpoints whose write failed (a full disk, an I/O error);
  // each left the files kept before it as they were.
  uint64_t checkpoints_failed() const { return failed_.load(std::memory_order_relaxed); }

 private:
  ServerCheckpoints(const ServerCheckpointsOptions& options, ReplayRegions* regions,
                    ReplayCore* core);
  // Restores the newest checkpoint that loads; OK when there is none.
  absl::Status RestoreNewest();
  // Reads the last start record, skips the epoch it names, records this
  // start.
  absl::Status RecordStart();
  // Opens the reservations and has the core publish under them.
  absl::Status ReserveSequences();
  // FailedPrecondition when a restored checkpoint has no reservations file
  // at `path`, or a lease cursor above its mark.
  absl::Status CheckRestoredCursors(const std::string& path) const;
  // Writes `cut` through the store (rotating the older ones); on the
  // writer's thread, or at Stop.
  absl::StatusOr<CheckpointWriteStats> WriteThroughStore(CheckpointCut* cut);
  // Counts, records and logs a written checkpoint; logs a failure.
  void NoteWritten(const CheckpointWriter::Result& result);
  // Takes the writer's finished result, if any; true if it took one.
  bool TakeResult();

  const ServerCheckpointsOptions options_;
  ReplayRegions* const regions_;
  ReplayCore* const core_;
  std::optional<CheckpointStore> store_;
  std::unique_ptr<SequenceReservations> reservations_;
  bool restored_ = false;
  std::string restored_path_;
  std::string checkpoint_path_;
  std::atomic<bool> requested_{false};
  std::atomic<uint64_t> failed_{0};

  // Core thread.
  absl::Time last_checkpoint_;
  bool in_progress_ = false;  // from a cut's begin until its result is taken
  absl::Time last_tick_;
  absl::Duration last_tick_cpu_;  // the core thread's CPU time then

  mutable Mutex mu_;
  std::optional<CheckpointWriteStats> last_written_ ABSL_GUARDED_BY(mu_);

  // Last: its thread uses the store and the regions.
  std::unique_ptr<CheckpointWriter> writer_;
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_CHECKPOINT_SERVER_CHECKPOINTS_H_
