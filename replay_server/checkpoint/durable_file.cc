// Copyright dreplay authors.

#include "replay_server/checkpoint/durable_file.h"

#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dreplay::server {

std::string DirectoryOf(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

absl::Status CreateDirectoryDurably(const std::string& dir, FileSystem* fs) {
  fs = OrDefault(fs);
  std::filesystem::path path = std::filesystem::path(dir).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();  // "a/b/" is "a/b"
  std::vector<std::filesystem::path> missing;           // deepest first
  for (std::filesystem::path p = path; !p.empty(); p = p.parent_path()) {
    if (fs->IsDirectory(p.string())) break;
    if (fs->Exists(p.string())) {
      return absl::FailedPreconditionError(absl::StrCat(p.string(), " is not a directory"));
    }
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    RETURN_IF_ERROR(fs->CreateDirectory(it->string()));
    // The new entry is durable only once its parent is synced.
    RETURN_IF_ERROR(fs->SyncDirectory(DirectoryOf(it->string())));
  }
  return absl::OkStatus();
}

absl::Status ReplaceFileDurably(const std::string& path, absl::string_view contents,
                                FileSystem* fs) {
  fs = OrDefault(fs);
  const std::string temp = path + ".tmp";
  absl::Status status;
  {
    absl::StatusOr<std::unique_ptr<WritableFile>> file = fs->NewWritableFile(temp);
    if (!file.ok()) return file.status();
    status = (*file)->Append(contents);
    if (status.ok()) status = (*file)->Sync();
    if (status.ok()) status = (*file)->Close();
  }
  if (!status.ok()) {
    fs->Remove(temp).IgnoreError();  // frees the space a full disk needs back
    return status;
  }
  RETURN_IF_ERROR(fs->Rename(temp, path));
  return fs->SyncDirectory(DirectoryOf(path));
}

}  // namespace dreplay::server
