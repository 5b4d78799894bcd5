// Copyright dreplay authors.
//
// unique_fd.h: sole ownership of a file descriptor, closed on destruction.
//
//   UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
//   if (!fd.valid()) return ErrnoError("open", path);
//   ... read(fd.get(), ...) ...
//   // closed here, or handed on with Release() / std::move.
//
// Movable, not copyable. Not thread-safe: one owner at a time.

#ifndef DREPLAY_COMMON_UNIQUE_FD_H_
#define DREPLAY_COMMON_UNIQUE_FD_H_

#include <unistd.h>

namespace dreplay {

class UniqueFd {
 public:
  // Holds nothing (get() == -1).
  UniqueFd() = default;
  // Takes ownership of `fd`; a negative fd (a failed open) holds nothing.
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }

  UniqueFd(UniqueFd&& other) : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) {
    if (this != &other) {
      Reset();
      fd_ = other.Release();
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  // The descriptor, still owned; -1 when none.
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

  // Gives up ownership without closing; the caller closes it (and sees
  // close()'s result). Afterwards holds nothing.
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

  // Closes the descriptor, if any, ignoring close()'s result; afterwards
  // holds nothing.
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace dreplay

#endif  // DREPLAY_COMMON_UNIQUE_FD_H_
