// Copyright dreplay authors.

#include "replay_server/checkpoint/file_system.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/status_macros.h"

namespace dreplay::server {
namespace {

constexpr mode_t kOwnerFileMode = 0600;
constexpr mode_t kOwnerDirectoryMode = 0700;

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) close(fd_);
  }

  absl::Status Append(absl::string_view data) override { return WriteAt(end_, data); }

  absl::Status WriteAt(uint64_t offset, absl::string_view data) override {
    const char* p = data.data();
    size_t n = data.size();
    while (n > 0) {
      const ssize_t w = pwrite(fd_, p, n, static_cast<off_t>(offset));
      if (w < 0) {
        if (errno == EINTR) continue;
        return ErrnoError("write", path_);
      }
      p += w;
      n -= static_cast<size_t>(w);
      offset += static_cast<uint64_t>(w);
    }
    if (offset > end_) end_ = offset;
    return absl::OkStatus();
  }

  absl::Status Sync() override {
    return fsync(fd_) == 0 ? absl::OkStatus() : ErrnoError("fsync", path_);
  }

  absl::Status Close() override {
    const int fd = fd_;
    fd_ = -1;
    return close(fd) == 0 ? absl::OkStatus() : ErrnoError("close", path_);
  }

 private:
  const std::string path_;
  int fd_;
  uint64_t end_ = 0;
};

class PosixReadableFile : public ReadableFile {
 public:
  PosixReadableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixReadableFile() override { close(fd_); }

  absl::StatusOr<uint64_t> Size() override {
    struct stat st;
    if (fstat(fd_, &st) != 0) return ErrnoError("stat", path_);
    return static_cast<uint64_t>(st.st_size);
  }

  absl::StatusOr<size_t> Read(void* data, size_t n) override {
    while (true) {
      const ssize_t r = read(fd_, data, n);
      if (r >= 0) return static_cast<size_t>(r);
      if (errno != EINTR) return ErrnoError("read", path_);
    }
  }

 private:
  const std::string path_;
  const int fd_;
};

class PosixFileSystem : public FileSystem {
 public:
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kOwnerFileMode);
    if (fd < 0) return ErrnoError("open", path);
    auto file = std::make_unique<PosixWritableFile>(path, fd);
    // A file that existed keeps its mode through O_CREAT.
    if (fchmod(fd, kOwnerFileMode) != 0) return ErrnoError("chmod", path);
    return file;
  }

  absl::StatusOr<std::unique_ptr<ReadableFile>> NewReadableFile(const std::string& path) override {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no file ", path));
      return ErrnoError("open", path);
    }
    return std::make_unique<PosixReadableFile>(path, fd);
  }

  bool Exists(const std::string& path) override { return access(path.c_str(), F_OK) == 0; }

  absl::Status Rename(const std::string& from, const std::string& to) override {
    if (std::rename(from.c_str(), to.c_str()) == 0) return absl::OkStatus();
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no file ", from));
    return ErrnoError(absl::StrCat("rename to ", to, " of"), from);
  }

  absl::Status Link(const std::string& from, const std::string& to) override {
    if (link(from.c_str(), to.c_str()) == 0) return absl::OkStatus();
    return ErrnoError(absl::StrCat("link as ", to, " of"), from);
  }

  absl::Status Remove(const std::string& path) override {
    if (unlink(path.c_str()) == 0) return absl::OkStatus();
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no file ", path));
    return ErrnoError("unlink", path);
  }

  absl::Status CreateDirectory(const std::string& dir) override {
    if (mkdir(dir.c_str(), kOwnerDirectoryMode) == 0) return absl::OkStatus();
    if (errno == EEXIST && IsDirectory(dir)) return absl::OkStatus();
    return ErrnoError("mkdir", dir);
  }

  bool IsDirectory(const std::string& dir) override {
    struct stat st;
    return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }

  absl::Status SyncDirectory(const std::string& dir) override {
    const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoError("open directory", dir);
    const bool synced = fsync(fd) == 0;
    const int saved_errno = errno;
    close(fd);
    errno = saved_errno;
    return synced ? absl::OkStatus() : ErrnoError("fsync directory", dir);
  }
};

}  // namespace

FileSystem* DefaultFileSystem() {
  static FileSystem* const fs = new PosixFileSystem();
  return fs;
}

absl::StatusOr<std::string> ReadWholeFile(FileSystem* fs, const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> file, fs->NewReadableFile(path));
  std::string text;
  char buffer[4096];
  while (true) {
    ASSIGN_OR_RETURN(const size_t n, file->Read(buffer, sizeof(buffer)));
    if (n == 0) return text;
    text.append(buffer, n);
  }
}

}  // namespace dreplay::server
