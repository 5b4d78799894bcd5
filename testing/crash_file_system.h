// Copyright dreplay authors.
//
// crash_file_system.h: an in-memory server::FileSystem that loses, at a
// simulated crash, what the durability contract (replay_server/
// file_system.h) does not promise to keep, and that can run out of space.
// A SIGKILL leaves the page cache intact, so a test that kills a process
// never sees the order of its fsyncs; this one does.
//
//   CrashFileSystem fs("/ckpt-root");      // the root exists, durably
//   fs.CrashAfter(37);                     // the 38th change fails, and all after it
//   ... run the code under test with &fs until it fails ...
//   fs.Crash(seed);                        // power loss: keep the synced state
//   ... restart the code under test on &fs ...
//
// The model. A file's bytes are durable once Sync() returned; writes since
// are pending. A directory's names (created, renamed, linked, removed, and
// sub-directories made) are durable once SyncDirectory() of it returned;
// changes since are pending, in order. At Crash(seed):
//   seed 0: every pending write and name change is dropped;
//   otherwise each file keeps a random subset of its pending writes (the
//   page cache writes back in any order), and each directory a random
//   prefix of its pending name changes (a journal keeps them in order).
// A directory whose own name did not survive is lost with what it held.
//
// Failures. CrashAfter(n): the first n changes (file creation, write, sync,
// rename, link, removal, directory creation and sync) succeed, every later
// call fails with Unavailable "simulated crash" (the process is dead) until
// Crash(). SetSpaceLimit(bytes): a write that would make the files' bytes
// exceed it writes what fits and fails with "No space left on device"
// (Internal, as the POSIX file system reports ENOSPC).
//
// Thread safety: every method is thread-safe (one mutex).

#ifndef DREPLAY_TESTING_CRASH_FILE_SYSTEM_H_
#define DREPLAY_TESTING_CRASH_FILE_SYSTEM_H_

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "replay_server/checkpoint/file_system.h"

namespace dreplay::testing {

class CrashFileSystem : public server::FileSystem {
 public:
  static constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

  // Paths must lie under `root` (absolute, normalised by the caller's
  // std::filesystem rules); the root itself exists and is durable.
  explicit CrashFileSystem(std::string root);
  ~CrashFileSystem() override;

  // See the file comment. kUnlimited: never.
  void CrashAfter(uint64_t changes);
  // True once a change was refused because of CrashAfter.
  bool dead() const;
  // Changes made so far (since construction).
  uint64_t changes() const;
  // The power loss: see the file comment. Clears CrashAfter and dead().
  void Crash(uint64_t seed);
  // See the file comment. kUnlimited by default.
  void SetSpaceLimit(uint64_t bytes);
  // Bytes the files reachable from a name (or open for writing) hold now.
  uint64_t used_bytes() const;
  // The names in `dir` now, sorted (for test messages).
  std::vector<std::string> List(const std::string& dir) const;

  // server::FileSystem.
  absl::StatusOr<std::unique_ptr<server::WritableFile>> NewWritableFile(
      const std::string& path) override;
  absl::StatusOr<std::unique_ptr<server::ReadableFile>> NewReadableFile(
      const std::string& path) override;
  bool Exists(const std::string& path) override;
  absl::Status Rename(const std::string& from, const std::string& to) override;
  absl::Status Link(const std::string& from, const std::string& to) override;
  absl::Status Remove(const std::string& path) override;
  absl::Status CreateDirectory(const std::string& dir) override;
  bool IsDirectory(const std::string& dir) override;
  absl::Status SyncDirectory(const std::string& dir) override;

 private:
  struct Write {
    uint64_t offset = 0;
    std::string bytes;
    bool truncate = false;  // a truncation to 0 (bytes empty)
  };
  struct Inode {
    std::string data;    // what a reader sees now
    std::string synced;  // what Sync() made durable
    std::vector<Write> pending;
    int open_writers = 0;
  };
  // A name: a file's inode, or (null) a sub-directory.
  using Entry = std::shared_ptr<Inode>;
  // One pending name change: each effect sets a name (an entry) or removes
  // it (nullopt); a rename is one change with two effects.
  using Change = std::vector<std::pair<std::string, std::optional<Entry>>>;
  struct Directory {
    std::map<std::string, Entry> live;
    std::map<std::string, Entry> durable;
    std::vector<Change> pending;
  };
  class File;
  class Reader;

  // "<dir>", "<name>" of `path`; InvalidArgument outside the root.
  absl::StatusOr<std::pair<std::string, std::string>> Split(const std::string& path) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The directory `dir` if it exists now.
  Directory* FindDirectory(const std::string& dir) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The live entry at `path`: NotFound when none.
  absl::StatusOr<Entry> Lookup(const std::string& path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts a change; Unavailable when the process is dead.
  absl::Status CountChange(const char* what, const std::string& path)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Apply(Directory* d, const Change& change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t UsedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // File operations, for File.
  absl::Status WriteTo(const std::string& path, Inode* inode, uint64_t offset,
                       absl::string_view bytes);
  absl::Status SyncFile(const std::string& path, Inode* inode);
  void CloseFile(Inode* inode);

  const std::string root_;
  mutable absl::Mutex mu_;
  std::map<std::string, Directory> dirs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Inode>> open_ ABSL_GUARDED_BY(mu_);  // being written
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t crash_after_ ABSL_GUARDED_BY(mu_) = kUnlimited;
  bool dead_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t space_limit_ ABSL_GUARDED_BY(mu_) = kUnlimited;
};

}  // namespace dreplay::testing

#endif  // DREPLAY_TESTING_CRASH_FILE_SYSTEM_H_
