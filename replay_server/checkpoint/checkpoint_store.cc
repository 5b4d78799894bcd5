// Copyright dreplay authors.

#include "replay_server/checkpoint/checkpoint_store.h"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "replay_server/checkpoint/durable_file.h"

namespace dreplay::server {
namespace {

constexpr char kLatestName[] = "replay.ckpt";
constexpr char kNewSuffix[] = ".new";
constexpr char kStartRecordName[] = "last_start";

// rename(from, to) when `from` exists.
absl::Status RenameIfPresent(FileSystem* fs, const std::string& from, const std::string& to) {
  const absl::Status s = fs->Rename(from, to);
  return absl::IsNotFound(s) ? absl::OkStatus() : s;
}

// A whole unsigned number in `base`; false for anything else.
bool ParseU64(absl::string_view text, int base, uint64_t* out) {
  // strtoull would also take leading blanks and signs.
  if (text.empty() || text.size() > 20 || !absl::ascii_isxdigit(text[0])) return false;
  const std::string digits(text);
  char* end = nullptr;
  errno = 0;
  const unsigned long long value =
      std::strtoull(digits.c_str(), &end, base);  // NOLINT(runtime/int)
  if (errno != 0 || end != digits.c_str() + digits.size()) return false;
  *out = value;
  return true;
}

std::string StartRecordPath(const std::string& dir) {
  return (std::filesystem::path(dir) / kStartRecordName).string();
}

}  // namespace

absl::Status CheckpointStoreOptions::Validate() const {
  if (dir.empty()) return absl::InvalidArgumentError("CheckpointStoreOptions.dir is empty");
  if (keep < 1 || keep > kMaxCheckpointKeep) {
    return absl::InvalidArgumentError(absl::StrCat("CheckpointStoreOptions.keep=", keep,
                                                   " must be in [1, ", kMaxCheckpointKeep, "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckpointStore> CheckpointStore::Open(const CheckpointStoreOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  if (const absl::Status s = CreateDirectoryDurably(options.dir, options.file_system); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot create checkpoint directory ", options.dir,
                                               ": ", s.message()));
  }
  return CheckpointStore(options);
}

std::string CheckpointStore::LatestPath() const {
  return (std::filesystem::path(options_.dir) / kLatestName).string();
}

std::string CheckpointStore::OlderPath(uint32_t k) const {
  return absl::StrCat(LatestPath(), ".", k);
}

std::string CheckpointStore::NewPath() const { return LatestPath() + kNewSuffix; }

std::vector<std::string> CheckpointStore::Candidates() const {
  std::vector<std::string> paths;
  for (const std::string& path : {NewPath(), LatestPath()}) {
    if (fs()->Exists(path)) paths.push_back(path);
  }
  for (uint32_t k = 1; k < options_.keep; ++k) {
    if (fs()->Exists(OlderPath(k))) paths.push_back(OlderPath(k));
  }
  return paths;
}

absl::Status CheckpointStore::Save(
    const std::function<absl::Status(const std::string& path)>& write) const {
  RETURN_IF_ERROR(write(NewPath()));
  return Rotate();
}

absl::Status CheckpointStore::Rotate() const {
  const std::string latest = LatestPath();
  FileSystem* const fs = this->fs();
  if (options_.keep > 1 && fs->Exists(latest)) {
    // Oldest first, so that every rename replaces the file it should drop.
    for (uint32_t k = options_.keep - 1; k >= 2; --k) {
      RETURN_IF_ERROR(RenameIfPresent(fs, OlderPath(k - 1), OlderPath(k)));
    }
    // A link, not a rename: replay.ckpt stays until the new one replaces
    // it. Linked under a temporary name and renamed over replay.ckpt.1, so
    // that (with keep 2) the one before is never missing either.
    const std::string previous = OlderPath(1);
    const std::string linked = previous + ".tmp";
    if (const absl::Status s = fs->Remove(linked); !s.ok() && !absl::IsNotFound(s)) return s;
    RETURN_IF_ERROR(fs->Link(latest, linked));
    RETURN_IF_ERROR(fs->Rename(linked, previous));
  }
  RETURN_IF_ERROR(fs->Rename(NewPath(), latest));
  return fs->SyncDirectory(options_.dir);
}

absl::StatusOr<std::optional<StartRecord>> CheckpointStore::ReadStartRecord() const {
  const std::string path = StartRecordPath(options_.dir);
  const absl::StatusOr<std::string> content = ReadWholeFile(fs(), path);
  if (absl::IsNotFound(content.status())) return std::optional<StartRecord>();
  if (!content.ok()) return content.status();
  const std::vector<absl::string_view> words =
      absl::StrSplit(absl::StripAsciiWhitespace(*content), ' ');
  StartRecord record;
  absl::string_view incarnation = words.size() == 4 ? words[2] : "";
  absl::string_view epoch = words.size() == 4 ? words[3] : "";
  if (words.size() != 4 || words[0] != "dreplay" || words[1] != "start" ||
      !absl::ConsumePrefix(&incarnation, "incarnation=") ||
      !absl::ConsumePrefix(&epoch, "epoch=") || !ParseU64(incarnation, 16, &record.incarnation) ||
      !ParseU64(epoch, 10, &record.epoch)) {
    return absl::DataLossError(absl::StrCat("start record ", path, " cannot be parsed"));
  }
  return std::optional<StartRecord>(record);
}

absl::Status CheckpointStore::WriteStartRecord(const StartRecord& record) const {
  return ReplaceFileDurably(
      StartRecordPath(options_.dir),
      absl::StrCat("dreplay start incarnation=", absl::Hex(record.incarnation),
                   " epoch=", record.epoch, "\n"),
      fs());
}

}  // namespace dreplay::server
