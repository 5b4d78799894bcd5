// Copyright dreplay authors.
//
// errno_status.h: a failed system call as an absl::Status, with what was
// attempted, on which path, and strerror(errno).
//
//   if (fsync(fd) != 0) return ErrnoError("fsync", path);
//   // Internal "fsync /data/ckpt.tmp: Input/output error"

#ifndef DREPLAY_COMMON_ERRNO_STATUS_H_
#define DREPLAY_COMMON_ERRNO_STATUS_H_

#include <string>

#include "absl/status/status.h"

namespace dreplay {

// Internal "<what> <path>: <strerror(errno)>". Reads errno, so call it
// straight after the failing call, before anything that may change errno.
// Thread-safe (errno is per thread; strerror's text is copied at once).
absl::Status ErrnoError(const std::string& what, const std::string& path);

}  // namespace dreplay

#endif  // DREPLAY_COMMON_ERRNO_STATUS_H_
