// Copyright dreplay authors.
//
// sequence_reservations.h: per-lease sequence high-water marks kept in a
// small durable file, so that no (lease, sequence) pair is reused after a
// crash.
//
// The server publishes each lease's ingest cursor c; the lease's actor may
// then write every sequence below c + ActorWindow <= c + L (L = lease
// slots). A restart restores the last checkpoint's cursors, which lag what
// the killed server had already handed out. So, with a checkpoint directory:
//
//   invariant: the server never publishes a cursor c for lease l unless the
//              persisted mark H_l >= c + L;
//   when a cursor would pass that, H_l grows to c + L + step * L and the file
//   is replaced (temp file, fdatasync, rename, directory fsync) before the
//   cursor is published; with step 64 that is one sync per 64 laps of a
//   lease;
//   on restart every lease resumes at max(restored cursor, floor(l)), the H_l
//   the file held at Open: the sequences between were handed out or may have
//   been, and are skipped, never reissued.
//
// A clean stop may write the exact cursors (WriteExact) once nothing can
// write the leases any more, so nothing is skipped after it.
//
// Syncs off the publishing thread (Publishable): the core asks for the next
// mark ahead of need, when a lease's remaining headroom H_l - (c + L) falls
// under half a step (step * L / 2), and a thread this object owns does the
// write, fdatasync and rename while the core goes on; the new mark counts
// only once the file is in place. Until then the core publishes no cursor
// beyond H_l - L: if a lease gets there first, its published cursor waits
// at the synced mark (a stall, counted in stalls(); the core itself never
// waits) and is published further when the sync completes (sync_generation()
// changes). With a step of 64 laps a lease has 32 laps of time for each
// sync.
//
// File ("sequence_reservations" in the checkpoint directory), text:
//   dreplay sequence reservations v1
//   leases <N>
//   <H_0>
//   ...
//   <H_{N-1}>
//   checksum <FNV-1a 64 of every byte before this line, hex>
// A missing file is an empty table (every floor 0: the first start on a
// directory); the server refuses to restore a checkpoint without the file
// (server_checkpoints.h). A file that fails to parse
// or to verify is refused (DataLoss): no floor derived from the checkpoint
// alone is safe, so the server does not start until it is dealt with.
//
// Thread safety: Open, ReserveAll, Reserve and WriteExact from one thread at
// a time, and Publishable from one thread (the core's: ingest); the server's
// main thread opens the table and writes the exact cursors at stop, once
// the core has stopped. reserved(), floor() and the counters are
// thread-safe. The sync thread is started by the first request and joined
// by WriteExact and the destructor.

#ifndef DREPLAY_REPLAY_SERVER_CHECKPOINT_SEQUENCE_RESERVATIONS_H_
#define DREPLAY_REPLAY_SERVER_CHECKPOINT_SEQUENCE_RESERVATIONS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/mutex.h"
#include "replay_server/checkpoint/file_system.h"

namespace dreplay::server {

struct SequenceReservationsOptions {
  // The file; its directory must exist.
  std::string path;
  // The layout's lease count and lease slots (L). Both >= 1.
  uint32_t leases = 0;
  uint64_t lease_slots = 0;
  // How far a mark grows past what is needed, in lease capacities (>= 1):
  // larger means rarer syncs and more sequences skipped after a crash.
  uint64_t step_leases = 64;
  // The file system (file_system.h), not owned; null: the process's POSIX
  // one.
  FileSystem* file_system = nullptr;

  absl::Status Validate() const;
};

class SequenceReservations {
 public:
  // The file name inside a checkpoint directory.
  static constexpr char kFileName[] = "sequence_reservations";

  // Reads options.path if it exists. InvalidArgument (options), DataLoss (a
  // damaged file, naming it), FailedPrecondition (a file for another lease
  // count), Internal (I/O).
  static absl::StatusOr<std::unique_ptr<SequenceReservations>> Open(
      const SequenceReservationsOptions& options);

  // True when Open read a file.
  bool loaded() const { return loaded_; }
  // The mark lease l had in the file at Open (0: none): resume no lower.
  uint64_t floor(uint32_t l) const { return floors_[l]; }
  // The mark persisted now. Thread-safe.
  uint64_t reserved(uint32_t l) const { return marks_[l].load(std::memory_order_acquire); }

  // Makes reserved(l) >= needed[l] for every lease: each one short grows to
  // needed + step_leases * lease_slots, and the file is written once (only
  // when one grows). Blocks on the sync. On error nothing is counted as
  // reserved beyond the last good write. REQUIRES: needed.size() == leases.
  absl::Status ReserveAll(absl::Span<const uint64_t> needed);
  // The same for one lease.
  absl::Status Reserve(uint32_t l, uint64_t needed);
  // Writes `cursors` as the marks (a clean stop: nothing will write beyond
  // them); stops the sync thread first (a sync in progress finishes).
  // REQUIRES: cursors.size() == leases and no lease is published any more.
  absl::Status WriteExact(absl::Span<const uint64_t> cursors);

  // The cursor lease l may publish now that its ingest cursor is `cursor`:
  // min(cursor, reserved(l) - L). Asks the sync thread for the next mark
  // ahead of need (see the file comment); never blocks on I/O. Counts a
  // stall when the result falls short of `cursor` and did not the call
  // before. One thread (the core's).
  uint64_t Publishable(uint32_t l, uint64_t cursor);
  // Changes each time the sync thread has put a new mark in place: publish
  // the leases again. Thread-safe.
  uint64_t sync_generation() const { return sync_generation_.load(std::memory_order_acquire); }
  // Times a lease's published cursor began to wait at its synced mark.
  // Thread-safe.
  uint64_t stalls() const { return stalls_.load(std::memory_order_relaxed); }
  // The longest write + fdatasync + rename of the sync thread. Thread-safe.
  absl::Duration max_background_sync() const {
    return absl::Nanoseconds(max_background_sync_ns_.load(std::memory_order_relaxed));
  }

  ~SequenceReservations();
  SequenceReservations(const SequenceReservations&) = delete;
  SequenceReservations& operator=(const SequenceReservations&) = delete;

  // File writes so far; thread-safe.
  uint64_t syncs() const { return syncs_.load(std::memory_order_relaxed); }

 private:
  explicit SequenceReservations(const SequenceReservationsOptions& options);
  // Writes `marks` and makes them the reserved ones.
  absl::Status Persist(const std::vector<uint64_t>& marks);
  std::vector<uint64_t> Marks() const;
  void SyncLoop();
  void StopSyncThread();

  const SequenceReservationsOptions options_;
  bool loaded_ = false;
  std::vector<uint64_t> floors_;
  std::unique_ptr<std::atomic<uint64_t>[]> marks_;  // persisted
  std::atomic<uint64_t> syncs_{0};
  std::atomic<uint64_t> stalls_{0};
  std::atomic<uint64_t> sync_generation_{0};
  std::atomic<int64_t> max_background_sync_ns_{0};
  Mutex file_mu_;  // one writer of the file at a time

  // The publishing thread's: the mark asked for last, and whether each lease
  // waits at its synced mark.
  std::vector<uint64_t> asked_;
  std::vector<bool> stalled_;

  Mutex mu_;
  CondVar changed_;
  std::vector<uint64_t> wanted_ ABSL_GUARDED_BY(mu_);  // marks asked for
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // started by the first request
};

// The text of a reservations file holding `marks` (exposed for tests).
std::string EncodeSequenceReservations(absl::Span<const uint64_t> marks);
// Parses that text. DataLoss naming what is wrong.
absl::StatusOr<std::vector<uint64_t>> DecodeSequenceReservations(const std::string& text);

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_CHECKPOINT_SEQUENCE_RESERVATIONS_H_
