// Copyright dreplay authors.
//
// snapshot_writer.h: the learner's parameter snapshots on disk, for offline
// evaluation (tools/experiment/evaluate_snapshots) that costs the learner nothing.
//
// A snapshot directory holds, for snapshot k (k = 0, 1, ...):
//   snapshot-<k, 5 digits>.params   the online network's params buffer
//                                   (rl/params_format.h; its version is k)
//   snapshots.jsonl                 one SnapshotRecord::ToJson() line per
//                                   snapshot, in order
// Each params file is written to a temporary name and renamed, so a reader
// never sees half a file; its line is appended (and flushed) after.
//
// Not thread-safe: one writer per directory, used from one thread.

#ifndef DREPLAY_LEARNER_CLIENT_SNAPSHOT_WRITER_H_
#define DREPLAY_LEARNER_CLIENT_SNAPSHOT_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "learner_client/learner_io.h"
#include "learner_client/metrics.h"

namespace dreplay::learner {

// "snapshot-00007.params" for index 7.
std::string SnapshotFileName(uint64_t index);

class SnapshotWriter {
 public:
  // Creates `dir` if it does not exist (its parent must) and truncates its
  // snapshots.jsonl. InvalidArgument for an empty path; the system's reason
  // when the directory or the file cannot be made.
  static absl::StatusOr<std::unique_ptr<SnapshotWriter>> Open(const std::string& dir);

  // Writes one snapshot. DataLoss when a write fails.
  absl::Status Write(const SnapshotRecord& record, absl::Span<const uint8_t> params);

  const std::string& dir() const { return dir_; }

 private:
  SnapshotWriter(std::string dir, std::unique_ptr<MetricsFile> index)
      : dir_(std::move(dir)), index_(std::move(index)) {}
  const std::string dir_;
  const std::unique_ptr<MetricsFile> index_;
};

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_SNAPSHOT_WRITER_H_
