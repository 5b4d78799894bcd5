// Copyright dreplay authors.
//
// Small files that must survive a crash whole or not at all: the start
// record and the sequence reservations; and the directory that holds them.
// Every function takes the file system to use (file_system.h; null: the
// process's POSIX one).
//
// Thread safety: the functions share no state; two writers of one path
// must not run at once (they share its temporary file).

#ifndef DREPLAY_REPLAY_SERVER_CHECKPOINT_DURABLE_FILE_H_
#define DREPLAY_REPLAY_SERVER_CHECKPOINT_DURABLE_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "replay_server/checkpoint/file_system.h"

namespace dreplay::server {

// The directory part of `path` ("." when it has none).
std::string DirectoryOf(const std::string& path);

// Creates `dir` and every missing parent (mode 0700: the files in it hold
// the replay memory, and a forged reservations file could make sequences
// be reused), syncing each new directory's parent so that the creation
// survives a crash. OK when it exists. FailedPrecondition when a component
// is not a directory; Internal naming the step and errno's text.
absl::Status CreateDirectoryDurably(const std::string& dir, FileSystem* fs = nullptr);

// Replaces `path` with `contents` atomically and durably: writes
// `path`.tmp (mode 0600), syncs its data, renames it over `path`, syncs the
// directory. A reader sees the old file or the new one, never a part. On
// failure the temporary file is removed (when the write failed) and `path`
// is kept. Errors: Internal naming the step, the file and errno's text.
absl::Status ReplaceFileDurably(const std::string& path, absl::string_view contents,
                                FileSystem* fs = nullptr);

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_CHECKPOINT_DURABLE_FILE_H_
