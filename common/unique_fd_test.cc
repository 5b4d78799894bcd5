// Copyright dreplay authors.

#include "common/unique_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <utility>

#include "gtest/gtest.h"

namespace dreplay {
namespace {

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

// Both ends of a fresh pipe.
void Pipe(int* read_end, int* write_end) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  *read_end = fds[0];
  *write_end = fds[1];
}

TEST(UniqueFdTest, DefaultHoldsNothing) {
  const UniqueFd fd;
  EXPECT_EQ(fd.get(), -1);
  EXPECT_FALSE(fd.valid());
}

TEST(UniqueFdTest, AFailedOpenHoldsNothingAndClosesNothing) {
  const UniqueFd fd(open("/no/such/file", O_RDONLY));
  EXPECT_FALSE(fd.valid());
}

TEST(UniqueFdTest, ClosesOnDestruction) {
  int r = -1, w = -1;
  Pipe(&r, &w);
  {
    const UniqueFd read_end(r);
    const UniqueFd write_end(w);
    EXPECT_TRUE(read_end.valid());
    EXPECT_EQ(read_end.get(), r);
  }
  EXPECT_FALSE(IsOpen(r));
  EXPECT_FALSE(IsOpen(w));
}

TEST(UniqueFdTest, ReleaseHandsOverWithoutClosing) {
  int r = -1, w = -1;
  Pipe(&r, &w);
  const UniqueFd write_end(w);
  int released = -1;
  {
    UniqueFd read_end(r);
    released = read_end.Release();
    EXPECT_FALSE(read_end.valid());
  }
  EXPECT_EQ(released, r);
  EXPECT_TRUE(IsOpen(r));
  EXPECT_EQ(close(released), 0);
}

TEST(UniqueFdTest, ResetClosesAndHoldsNothing) {
  int r = -1, w = -1;
  Pipe(&r, &w);
  const UniqueFd write_end(w);
  UniqueFd read_end(r);
  read_end.Reset();
  EXPECT_FALSE(read_end.valid());
  EXPECT_FALSE(IsOpen(r));
}

TEST(UniqueFdTest, MoveTransfersOwnershipAndAssignmentClosesTheOldOne) {
  int r1 = -1, w1 = -1, r2 = -1, w2 = -1;
  Pipe(&r1, &w1);
  Pipe(&r2, &w2);
  const UniqueFd keep_w1(w1), keep_w2(w2);
  UniqueFd a(r1);
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(b.get(), r1);
  UniqueFd c(r2);
  c = std::move(b);
  EXPECT_FALSE(IsOpen(r2));
  EXPECT_EQ(c.get(), r1);
  EXPECT_TRUE(IsOpen(r1));
}

}  // namespace
}  // namespace dreplay
