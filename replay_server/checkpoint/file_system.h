// Copyright dreplay authors.
//
// file_system.h: the file operations the checkpoint directory needs, behind
// a small interface, so that tests can run the durable files (checkpoints,
// sequence reservations, the start record) over a file system that loses
// what was not synced at a simulated crash, or runs out of space.
//
//   FileSystem* fs = DefaultFileSystem();  // POSIX, process-wide
//   ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, fs->NewWritableFile(tmp));
//   RETURN_IF_ERROR(f->Append(bytes));
//   RETURN_IF_ERROR(f->Sync());
//   RETURN_IF_ERROR(f->Close());
//   RETURN_IF_ERROR(fs->Rename(tmp, path));
//   RETURN_IF_ERROR(fs->SyncDirectory(dir));
//
// Durability contract (what a crash keeps), for every implementation: a
// file's bytes survive once Sync() returned OK; a name created, renamed,
// linked or removed in a directory survives once SyncDirectory() of that
// directory returned OK. Anything else may or may not survive.
//
// Errors: every method returns a Status naming the operation and the path;
// NotFound where a path must exist and does not; Internal (with errno's
// text) for the rest.
//
// Thread safety: every method may be called from any thread; one
// WritableFile or ReadableFile from one thread at a time.

#ifndef DREPLAY_REPLAY_SERVER_CHECKPOINT_FILE_SYSTEM_H_
#define DREPLAY_REPLAY_SERVER_CHECKPOINT_FILE_SYSTEM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dreplay::server {

// A file being written, from offset 0 (NewWritableFile truncates).
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Writes `data` at the end of what was appended so far.
  virtual absl::Status Append(absl::string_view data) = 0;
  // Writes `data` at `offset` (at most the current size); the end of the
  // appended data moves only when the write goes past it.
  virtual absl::Status WriteAt(uint64_t offset, absl::string_view data) = 0;
  // Makes the bytes written so far durable (fsync).
  virtual absl::Status Sync() = 0;
  // Releases the file; further calls are bugs. The destructor closes an
  // open file and ignores its error.
  virtual absl::Status Close() = 0;
};

// A file being read from offset 0.
class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  // The file's size now.
  virtual absl::StatusOr<uint64_t> Size() = 0;
  // Reads up to `n` bytes into `data`; 0 at the end of the file.
  virtual absl::StatusOr<size_t> Read(void* data, size_t n) = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Creates or truncates `path`, readable and writable by its owner alone
  // (mode 0600, also when it existed with another mode).
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;
  // NotFound when `path` does not exist.
  virtual absl::StatusOr<std::unique_ptr<ReadableFile>> NewReadableFile(
      const std::string& path) = 0;
  virtual bool Exists(const std::string& path) = 0;
  // Replaces `to` with `from` atomically.
  virtual absl::Status Rename(const std::string& from, const std::string& to) = 0;
  // A second name `to` (which must not exist) for `from`.
  virtual absl::Status Link(const std::string& from, const std::string& to) = 0;
  // NotFound when `path` does not exist.
  virtual absl::Status Remove(const std::string& path) = 0;
  // Creates the directory `dir` (mode 0700); its parent must exist. OK when
  // it exists already as a directory.
  virtual absl::Status CreateDirectory(const std::string& dir) = 0;
  // True when `dir` exists and is a directory.
  virtual bool IsDirectory(const std::string& dir) = 0;
  // Makes the names in `dir` durable (fsync of the directory).
  virtual absl::Status SyncDirectory(const std::string& dir) = 0;
};

// The process's POSIX file system. Never null; not owned.
FileSystem* DefaultFileSystem();

// `fs` when set, else DefaultFileSystem().
inline FileSystem* OrDefault(FileSystem* fs) { return fs != nullptr ? fs : DefaultFileSystem(); }

// The whole of `path`. NotFound when it does not exist.
absl::StatusOr<std::string> ReadWholeFile(FileSystem* fs, const std::string& path);

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_CHECKPOINT_FILE_SYSTEM_H_
