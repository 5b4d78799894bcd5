// Copyright dreplay authors.
//
// Small files that must survive a crash whole or not at all: the start
// record and the sequence reservations.
//
// Thread safety: the functions share no state; two writers of one path
// must not run at once (they share its temporary file).

#ifndef DREPLAY_REPLAY_SERVER_DURABLE_FILE_H_
#define DREPLAY_REPLAY_SERVER_DURABLE_FILE_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dreplay::server {

// Checkpoint and reservation files are read and written by the server's
// user alone (they hold the replay memory, and a forged reservations file
// could make sequences be reused); so is a directory the server creates.
inline constexpr mode_t kPrivateFileMode = 0600;
inline constexpr mode_t kPrivateDirectoryMode = 0700;

// Creates `dir` and every missing parent (kPrivateDirectoryMode), syncing
// each new directory's parent so that the creation survives a crash. OK when
// it exists. FailedPrecondition when a path component is not a directory;
// Internal naming the step and errno's text.
absl::Status CreateDirectoryDurably(const std::string& dir);

// fsync of a directory, so renames and links in it are durable.
// Errors: Internal naming the directory and errno's text.
absl::Status SyncDirectory(const std::string& dir);

// Replaces `path` with `contents` atomically and durably: writes
// `path`.tmp, syncs its data, renames it over `path`, syncs the directory.
// A reader sees the old file or the new one, never a part. On failure the
// temporary file is removed (when the write failed) and `path` is kept.
// Errors: Internal naming the step, the file and errno's text.
absl::Status ReplaceFileDurably(const std::string& path, absl::string_view contents);

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_DURABLE_FILE_H_
