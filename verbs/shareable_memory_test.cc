// Copyright dreplay authors.

#include "verbs/shareable_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "gtest/gtest.h"

namespace dreplay::verbs {
namespace {

TEST(ShareableMemoryTest, SegmentsAreContiguousAndShared) {
  const size_t page = ShareableMemory::PageBytes();
  auto m = ShareableMemory::Allocate(4 * page, 2 * page, false);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->segment_count(), 2u);
  std::memset(m->data(), 7, m->size());
  bool exact = false;
  auto segments = ShareableMemory::FindSegments(m->data(), m->size(), &exact);
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_TRUE(exact);
  EXPECT_EQ(segments[1].addr, m->data() + 2 * page);
  // A second mapping of segment 1 sees and changes the same bytes.
  void* peer = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, segments[1].fd, 0);
  ASSERT_NE(peer, MAP_FAILED);
  EXPECT_EQ(static_cast<char*>(peer)[0], 7);
  static_cast<char*>(peer)[5] = 9;
  EXPECT_EQ(m->data()[2 * page + 5], 9);
  munmap(peer, 2 * page);
  // Neither may be truncated by whoever holds the fd.
  EXPECT_NE(ftruncate(segments[0].fd, 0), 0);
}

TEST(ShareableMemoryTest, PartialRangesAreNotExact) {
  const size_t page = ShareableMemory::PageBytes();
  auto m = ShareableMemory::Allocate(4 * page, page, false);
  ASSERT_TRUE(m.ok()) << m.status();
  bool exact = true;
  auto segments = ShareableMemory::FindSegments(m->data() + page / 2, 2 * page, &exact);
  EXPECT_FALSE(exact);
  EXPECT_EQ(segments.size(), 1u);  // the one segment wholly inside
  segments = ShareableMemory::FindSegments(m->data() + page, 2 * page, &exact);
  EXPECT_TRUE(exact);
  EXPECT_EQ(segments.size(), 2u);
  std::vector<char> plain(page);
  segments = ShareableMemory::FindSegments(plain.data(), plain.size(), &exact);
  EXPECT_TRUE(segments.empty());
  EXPECT_FALSE(exact);
}

TEST(ShareableMemoryTest, ShortLastSegmentCoversTheAskedSize) {
  const size_t page = ShareableMemory::PageBytes();
  auto m = ShareableMemory::Allocate(page + 100, page, false);
  ASSERT_TRUE(m.ok()) << m.status();
  bool exact = false;
  EXPECT_EQ(ShareableMemory::FindSegments(m->data(), m->size(), &exact).size(), 2u);
  EXPECT_TRUE(exact);
}

TEST(ShareableMemoryTest, ReadOnlySegmentsCannotBeMappedWritable) {
  const size_t page = ShareableMemory::PageBytes();
  auto m = ShareableMemory::Allocate(page, 0, true);
  ASSERT_TRUE(m.ok()) << m.status();
  m->data()[0] = 3;  // the owner still writes
  auto segments = ShareableMemory::FindSegments(m->data(), m->size());
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_TRUE(segments[0].read_only);
  EXPECT_EQ(mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, segments[0].fd, 0), MAP_FAILED);
  // Not through a reopened fd either.
  const std::string path = "/proc/self/fd/" + std::to_string(segments[0].fd);
  const int again = open(path.c_str(), O_RDWR);
  ASSERT_GE(again, 0);
  EXPECT_EQ(mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, again, 0), MAP_FAILED);
  void* ro = mmap(nullptr, page, PROT_READ, MAP_SHARED, again, 0);
  ASSERT_NE(ro, MAP_FAILED);
  EXPECT_EQ(static_cast<char*>(ro)[0], 3);
  munmap(ro, page);
  close(again);
}

TEST(ShareableMemoryTest, RefusesBadSizesAndForgetsFreedMemory) {
  EXPECT_FALSE(ShareableMemory::Allocate(0, 0, false).ok());
  EXPECT_FALSE(ShareableMemory::Allocate(100, 100, false).ok());
  const size_t page = ShareableMemory::PageBytes();
  char* at = nullptr;
  {
    auto m = ShareableMemory::Allocate(page, 0, false);
    ASSERT_TRUE(m.ok());
    ShareableMemory moved = std::move(*m);
    at = moved.data();
    EXPECT_EQ(ShareableMemory::FindSegments(at, page).size(), 1u);
  }
  EXPECT_TRUE(ShareableMemory::FindSegments(at, page).empty());
}

}  // namespace
}  // namespace dreplay::verbs
