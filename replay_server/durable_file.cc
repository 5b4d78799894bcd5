// Copyright dreplay authors.

#include "replay_server/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

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

absl::Status ReplaceFileDurably(const std::string& path, absl::string_view contents) {
  const std::string temp = path + ".tmp";
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("open", temp);
  bool ok = write(fd, contents.data(), contents.size()) == static_cast<ssize_t>(contents.size());
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
