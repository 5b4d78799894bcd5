// Copyright dreplay authors.

#include "learner_client/snapshot_writer.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace dreplay::learner {

std::string SnapshotFileName(uint64_t index) {
  return absl::StrFormat("snapshot-%05d.params", index);
}

absl::StatusOr<std::unique_ptr<SnapshotWriter>> SnapshotWriter::Open(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("the snapshot directory is empty");
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create the snapshot directory ", dir, ": ", std::strerror(errno)));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsFile> index,
                   MetricsFile::Open(absl::StrCat(dir, "/snapshots.jsonl")));
  return std::unique_ptr<SnapshotWriter>(new SnapshotWriter(dir, std::move(index)));
}

absl::Status SnapshotWriter::Write(const SnapshotRecord& record, absl::Span<const uint8_t> params) {
  const std::string path = absl::StrCat(dir_, "/", SnapshotFileName(record.index));
  const std::string temp = path + ".tmp";
  std::FILE* file = std::fopen(temp.c_str(), "wb");
  if (file == nullptr) {
    return absl::DataLossError(absl::StrCat("cannot create ", temp, ": ", std::strerror(errno)));
  }
  const bool written = std::fwrite(params.data(), 1, params.size(), file) == params.size();
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed) {
    std::remove(temp.c_str());
    return absl::DataLossError(absl::StrCat("cannot write ", temp));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    return absl::DataLossError(
        absl::StrCat("cannot rename ", temp, " to ", path, ": ", std::strerror(errno)));
  }
  return index_->Write(record.ToJson());
}

}  // namespace dreplay::learner
