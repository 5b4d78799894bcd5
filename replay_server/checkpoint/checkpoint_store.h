// Copyright dreplay authors.
//
// checkpoint_store.h: the checkpoint files of a directory, the newest `keep`
// of them.
//
//   <dir>/replay.ckpt       the newest checkpoint
//   <dir>/replay.ckpt.1     the one before it
//   ...
//   <dir>/replay.ckpt.<keep - 1>
//
// Save(write) has `write` put the new checkpoint at NewPath()
// ("<dir>/replay.ckpt.new"; WriteCheckpoint gives it that name only once
// it is complete and fsynced), then shifts the older files up by one (the
// oldest beyond `keep` is replaced), hard-links replay.ckpt as replay.ckpt.1
// (through a temporary name), renames replay.ckpt.new over replay.ckpt and
// fsyncs the directory. So
// replay.ckpt exists from the first save on, and a crash at any point leaves
// every complete checkpoint under one of these names (replay.ckpt.new when
// it came between the write and the last rename).
//
// Candidates() lists the files a restart should try, newest first:
// replay.ckpt.new, replay.ckpt, replay.ckpt.1, ... (those that exist). The
// server restores the first that loads, and falls back to the next when one
// is damaged (DataLoss).
//
// Files beyond `keep` left by a run with a larger `keep` are neither read nor
// removed.
//
// The start record, "<dir>/last_start": the incarnation and epoch of the
// last server that started on this directory, written (fsynced) before it
// accepts clients. A server that crashes before its next checkpoint leaves a
// record newer than the checkpoint, so the next start knows an epoch it must
// not run again, and that work was lost.
//
// Thread safety: Save() from one thread at a time; the rest is constant.

#ifndef DREPLAY_REPLAY_SERVER_CHECKPOINT_CHECKPOINT_STORE_H_
#define DREPLAY_REPLAY_SERVER_CHECKPOINT_CHECKPOINT_STORE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "replay_server/checkpoint/file_system.h"

namespace dreplay::server {

// The most checkpoints a store keeps.
inline constexpr uint32_t kMaxCheckpointKeep = 100;

// What the start record holds (see the file comment).
struct StartRecord {
  uint64_t incarnation = 0;
  uint64_t epoch = 0;
};

struct CheckpointStoreOptions {
  // The directory; created by CheckpointStore::Open if missing.
  std::string dir;
  // Checkpoints kept, newest first; in [1, kMaxCheckpointKeep]. More cost
  // disk (each is the size of the slot ring and then some) and buy older
  // fallbacks when the newest files are damaged.
  uint32_t keep = 1;
  // The file system (file_system.h), not owned; null: the process's POSIX
  // one. Tests pass one that simulates crashes and full disks.
  FileSystem* file_system = nullptr;

  // OK, or InvalidArgument naming the bad field and value.
  absl::Status Validate() const;
};

class CheckpointStore {
 public:
  // Validates the options and creates the directory. InvalidArgument, or
  // Internal naming the directory.
  static absl::StatusOr<CheckpointStore> Open(const CheckpointStoreOptions& options);

  // "<dir>/replay.ckpt": the newest checkpoint.
  std::string LatestPath() const;
  // "<dir>/replay.ckpt.<k>" for k >= 1: the k-th before the newest.
  std::string OlderPath(uint32_t k) const;
  // Where Save() has the new checkpoint written.
  std::string NewPath() const;

  // The existing checkpoint files, newest first (see the file comment).
  std::vector<std::string> Candidates() const;

  // Calls write(NewPath()); when it succeeds, rotates the files. Returns
  // write's error as it is, or Internal naming the file a rename or link
  // failed on (the new checkpoint then stays at NewPath(), a candidate).
  absl::Status Save(const std::function<absl::Status(const std::string& path)>& write) const;

  // The start record; nullopt when there is none, DataLoss when it cannot
  // be parsed, Internal for an I/O error.
  absl::StatusOr<std::optional<StartRecord>> ReadStartRecord() const;
  // Replaces the start record atomically (a temporary file, fsync, rename,
  // directory fsync). Internal naming the file on failure.
  absl::Status WriteStartRecord(const StartRecord& record) const;

  const CheckpointStoreOptions& options() const { return options_; }
  FileSystem* fs() const { return OrDefault(options_.file_system); }

 private:
  explicit CheckpointStore(const CheckpointStoreOptions& options) : options_(options) {}
  absl::Status Rotate() const;

  CheckpointStoreOptions options_;
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_CHECKPOINT_CHECKPOINT_STORE_H_
