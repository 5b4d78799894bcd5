// Copyright dreplay authors.
//
// checkpoint_writer.h: writes checkpoint cuts on a thread of its own, so the
// replay core only pauses for the cut (checkpoint.h).
//
//   CheckpointWriter writer([&](CheckpointCut* cut) {
//     return WriteCheckpoint(path, regions, cut);
//   });
//   // core thread, between steps:
//   if (!writer.busy()) writer.Start(core->CutCheckpoint(writer.TakeSpare()));
//   ...
//   if (std::optional<CheckpointWriter::Result> r = writer.TakeResult()) {
//     if (r->ok()) core->CheckpointWritten();
//   }
//
// The thread runs at nice 10 (Linux, per thread): on a machine short of
// CPUs the core thread is scheduled first.
//
// One write at a time: Start() while busy() is a bug (CHECK). The result of
// a write is kept until TakeResult() takes it.
//
// Thread safety: every method may be called from any thread; the server
// calls Start() and TakeResult() from its core thread and WaitIdle() from
// Stop(). The write function runs on the writer's thread only.
// The destructor waits for the write in progress, then joins the thread.

#ifndef DREPLAY_REPLAY_SERVER_CHECKPOINT_CHECKPOINT_WRITER_H_
#define DREPLAY_REPLAY_SERVER_CHECKPOINT_CHECKPOINT_WRITER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <thread>

#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "replay_server/checkpoint/checkpoint.h"

namespace dreplay::server {

class CheckpointWriter {
 public:
  using Result = absl::StatusOr<CheckpointWriteStats>;
  using WriteFn = std::function<Result(CheckpointCut* cut)>;

  // Starts the thread. `write` writes one cut (and may rotate files).
  // `capacity`: the cut's entries; the thread prepares a spare cut of that
  // size with its memory touched (0: none), and keeps each written cut's
  // buffers as the next spare.
  explicit CheckpointWriter(WriteFn write, uint64_t capacity = 0);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // True from Start() until the write has finished.
  bool busy() const;
  // Hands `cut` to the thread; returns at once. REQUIRES: !busy().
  void Start(CheckpointCut cut);
  // The spare cut's buffers, for ReplayCore::BeginCheckpoint (empty when
  // none is ready yet).
  CheckpointCut TakeSpare();
  // True when TakeSpare() would return buffers of `capacity` entries (always
  // true for capacity 0). A cut begun without them allocates and touches
  // 16 bytes per entry at its begin: wait for this first.
  bool spare_ready() const;
  // The finished write's result, once; nullopt while none is waiting.
  std::optional<Result> TakeResult();
  // Blocks until no write is in progress.
  void WaitIdle();

 private:
  void Loop();

  const WriteFn write_;
  const uint64_t capacity_;
  mutable Mutex mu_;
  CondVar changed_;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<CheckpointCut> job_ ABSL_GUARDED_BY(mu_);
  std::optional<Result> result_ ABSL_GUARDED_BY(mu_);
  CheckpointCut spare_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_CHECKPOINT_CHECKPOINT_WRITER_H_
