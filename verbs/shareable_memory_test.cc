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

TEST(ShareableMemoryTest, ASegmentIsClaimedWritableByOneHolderAtATime) {
  const size_t page = ShareableMemory::PageBytes();
  auto m = ShareableMemory::Allocate(2 * page, page, false);
  ASSERT_TRUE(m.ok()) << m.status();
  const auto both = ShareableMemory::FindSegments(m->data(), m->size());
  const auto first = ShareableMemory::FindSegments(m->data(), page);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_TRUE(ShareableMemory::ClaimWritable(first, 1));
  EXPECT_TRUE(ShareableMemory::ClaimWritable(both, 1));  // its own again, and one more
  EXPECT_FALSE(ShareableMemory::ClaimWritable(first, 2));
  EXPECT_FALSE(ShareableMemory::ClaimWritable(both, 2));
  EXPECT_FALSE(ShareableMemory::ClaimWritable(first, 0));
  // Renewing releases the claims; the old fds are no longer listed, so a
  // claim made from them fails and one from a fresh lookup succeeds.
  ASSERT_TRUE(ShareableMemory::RenewClaimed(1).ok());
  EXPECT_FALSE(ShareableMemory::ClaimWritable(first, 2));
  EXPECT_TRUE(
      ShareableMemory::ClaimWritable(ShareableMemory::FindSegments(m->data(), m->size()), 2));
  // Sealed segments are never granted writable.
  auto sealed = ShareableMemory::Allocate(page, 0, true);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_FALSE(ShareableMemory::ClaimWritable(
      ShareableMemory::FindSegments(sealed->data(), sealed->size()), 3));
}

TEST(ShareableMemoryTest, RenewingCutsOffEveryEarlierMappingAndKeepsTheBytes) {
  const size_t page = ShareableMemory::PageBytes();
  auto m = ShareableMemory::Allocate(4 * page, 2 * page, false);
  ASSERT_TRUE(m.ok()) << m.status();
  for (size_t i = 0; i < m->size(); ++i) m->data()[i] = static_cast<char>(i * 7 + 3);
  const std::vector<char> before(m->data(), m->data() + m->size());
  const auto segments = ShareableMemory::FindSegments(m->data(), m->size());
  ASSERT_EQ(segments.size(), 2u);
  // A peer's writable mapping of the second segment, as a same-host grant
  // gives it; only that segment is claimed.
  char* peer = static_cast<char*>(
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, segments[1].fd, 0));
  ASSERT_NE(peer, MAP_FAILED);
  peer[1] = 'a';
  ASSERT_EQ(m->data()[2 * page + 1], 'a');
  ASSERT_TRUE(ShareableMemory::ClaimWritable({segments[1]}, 7));
  ASSERT_TRUE(ShareableMemory::RenewClaimed(7).ok());

  // The bytes are all there; the peer's later writes are not.
  std::vector<char> expected = before;
  expected[2 * page + 1] = 'a';
  EXPECT_EQ(std::memcmp(m->data(), expected.data(), expected.size()), 0);
  peer[2] = 'b';
  EXPECT_EQ(m->data()[2 * page + 2], expected[2 * page + 2]);
  // And the owner's writes no longer reach the peer.
  m->data()[2 * page + 3] = 'c';
  EXPECT_NE(peer[3], 'c');
  munmap(peer, 2 * page);

  // The renewed segment is a sealed memfd that can be shared again; the
  // unclaimed one was left as it was.
  const auto after = ShareableMemory::FindSegments(m->data(), m->size());
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0].fd, segments[0].fd);
  EXPECT_NE(fcntl(after[1].fd, F_GET_SEALS) & F_SEAL_SHRINK, 0);
  char* again = static_cast<char*>(
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, after[1].fd, 0));
  ASSERT_NE(again, MAP_FAILED);
  again[4] = 'd';
  EXPECT_EQ(m->data()[2 * page + 4], 'd');
  munmap(again, 2 * page);
  // Renewing with nothing claimed changes nothing.
  EXPECT_TRUE(ShareableMemory::RenewClaimed(7).ok());
  EXPECT_EQ(ShareableMemory::FindSegments(m->data(), m->size())[1].fd, after[1].fd);
}

}  // namespace
}  // namespace dreplay::verbs
