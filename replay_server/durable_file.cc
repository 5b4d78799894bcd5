// Copyright dreplay authors.

#include "replay_server/durable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/status_macros.h"

namespace dreplay::server {

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open directory", dir);
  const bool synced = fsync(fd) == 0;
  const int saved_errno = errno;
  close(fd);
  errno = saved_errno;
  return synced ? absl::OkStatus() : ErrnoError("fsync directory", dir);
}

absl::Status CreateDirectoryDurably(const std::string& dir) {
  std::filesystem::path path = std::filesystem::path(dir).lexically_normal();
  if (path.has_filename() == false) path = path.parent_path();  // "a/b/" is "a/b"
  std::vector<std::filesystem::path> missing;                   // deepest first
  for (std::filesystem::path p = path; !p.empty(); p = p.parent_path()) {
    struct stat st;
    if (stat(p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        return absl::FailedPreconditionError(absl::StrCat(p.string(), " is not a directory"));
      }
      break;
    }
    if (errno != ENOENT) return ErrnoError("stat", p.string());
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (mkdir(it->c_str(), kPrivateDirectoryMode) != 0 && errno != EEXIST) {
      return ErrnoError("mkdir", it->string());
    }
    std::string parent = it->parent_path().string();
    if (parent.empty()) parent = ".";
    // The new entry is durable only once its parent is synced.
    RETURN_IF_ERROR(SyncDirectory(parent));
  }
  return absl::OkStatus();
}

absl::Status ReplaceFileDurably(const std::string& path, absl::string_view contents) {
  const std::string temp = path + ".tmp";
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) return ErrnoError("open", temp);
  // A temporary file left by an older build keeps its mode through O_CREAT.
  bool ok = fchmod(fd, kPrivateFileMode) == 0;
  ok = ok && write(fd, contents.data(), contents.size()) == static_cast<ssize_t>(contents.size());
  ok = ok && fdatasync(fd) == 0;
  const int saved_errno = errno;
  close(fd);
  errno = saved_errno;
  if (!ok) {
    const absl::Status status = ErrnoError("write", temp);
    unlink(temp.c_str());
    return status;
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    return ErrnoError(absl::StrCat("rename to ", path, " of"), temp);
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  return SyncDirectory(dir);
}

}  // namespace dreplay::server
