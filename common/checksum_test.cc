// Copyright dreplay authors.

#include "common/checksum.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "xxhash.h"

namespace dreplay {
namespace {

// Lengths that take each of XXH3's paths: empty, 1-3, 4-8, 9-16, 17-128,
// 129-240, then the vector loop (stripes, blocks, a partial last block).
const size_t kLengths[] = {0,   1,   3,   4,   8,    9,    16,   17,   128,        129,
                           240, 241, 255, 256, 1023, 1024, 1025, 4096, 28672 + 56, 65536 + 7};

std::vector<unsigned char> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> bytes(n);
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  return bytes;
}

TEST(ChecksumTest, PublishedValueOfTheEmptyInput) {
  EXPECT_EQ(Xxh3("", 0, 0), 0x2D06800538D394C2ULL);
}

TEST(ChecksumTest, EqualsTheSystemLibraryAtEveryLengthAndSeed) {
  // The system's libxxhash is the reference: checksums written by an
  // earlier build, or by a peer on another processor, must still verify.
  const std::vector<unsigned char> bytes = RandomBytes(70000, 1);
  for (const uint64_t seed : {uint64_t{0}, uint64_t{0x6472706c6179}, ~uint64_t{0}}) {
    for (const size_t n : kLengths) {
      for (const size_t offset : {size_t{0}, size_t{1}, size_t{13}}) {
        EXPECT_EQ(Xxh3(bytes.data() + offset, n, seed),
                  XXH3_64bits_withSeed(bytes.data() + offset, n, seed))
            << "length " << n << " offset " << offset << " seed " << seed << " with "
            << Xxh3Implementation();
      }
    }
  }
}

TEST(ChecksumTest, AStreamEqualsTheOneShotHashOfItsConcatenation) {
  const std::vector<unsigned char> bytes = RandomBytes(70000, 2);
  std::mt19937_64 rng(3);
  for (int round = 0; round < 50; ++round) {
    const size_t total = rng() % bytes.size();
    Xxh3Stream stream(round);
    size_t at = 0;
    while (at < total) {
      const size_t piece = std::min<size_t>(total - at, rng() % 3000);
      stream.Update(bytes.data() + at, piece);
      at += piece;
    }
    EXPECT_EQ(stream.Digest(), XXH3_64bits_withSeed(bytes.data(), total, round))
        << "round " << round << ", " << total << " bytes";
  }
}

TEST(ChecksumTest, DigestMayBeTakenMidStreamAndAFlippedBitChangesTheSum) {
  std::vector<unsigned char> bytes = RandomBytes(5000, 4);
  Xxh3Stream stream(7);
  stream.Update(bytes.data(), 2000);
  EXPECT_EQ(stream.Digest(), Xxh3(bytes.data(), 2000, 7));
  stream.Update(bytes.data() + 2000, 3000);
  const uint64_t whole = stream.Digest();
  EXPECT_EQ(whole, Xxh3(bytes.data(), 5000, 7));
  bytes[4321] ^= 0x10;
  EXPECT_NE(Xxh3(bytes.data(), 5000, 7), whole);
}

TEST(ChecksumTest, NamesItsImplementation) {
  const std::string name = Xxh3Implementation();
  EXPECT_TRUE(name == "avx2" || name == "sse2" || name == "scalar") << name;
#if defined(__x86_64__)
  EXPECT_EQ(name, __builtin_cpu_supports("avx2") ? "avx2" : "sse2");
#endif
}

}  // namespace
}  // namespace dreplay
