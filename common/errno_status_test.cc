// Copyright dreplay authors.

#include "common/errno_status.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace dreplay {
namespace {

TEST(ErrnoErrorTest, NamesTheCallThePathAndTheSystemsReason) {
  errno = ENOENT;
  const absl::Status status = ErrnoError("open", "/no/such/file");
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(), std::string("open /no/such/file: ") + std::strerror(ENOENT));
}

TEST(ErrnoErrorTest, ReadsErrnoLeftByAFailedCall) {
  ASSERT_LT(open("/no/such/dir/file", O_RDONLY), 0);
  const absl::Status status = ErrnoError("open", "/no/such/dir/file");
  EXPECT_EQ(status.message(), std::string("open /no/such/dir/file: ") + std::strerror(ENOENT));
}

TEST(ErrnoErrorTest, KeepsAWhatThatNamesASecondPath) {
  errno = EXDEV;
  const absl::Status status = ErrnoError("rename to /b of", "/a");
  EXPECT_EQ(status.message(), std::string("rename to /b of /a: ") + std::strerror(EXDEV));
}

}  // namespace
}  // namespace dreplay
