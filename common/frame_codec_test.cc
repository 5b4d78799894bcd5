// Copyright dreplay authors.

#include "common/frame_codec.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace dreplay {
namespace {

constexpr CodecKind kKinds[] = {CodecKind::kRaw, CodecKind::kLz4, CodecKind::kLz4Hc,
                                CodecKind::kZstd};
constexpr int kSide = 84;

// Frames alike pixels84's: a black 84x84 field with a few gray blocks that
// move from frame to frame.
std::vector<uint8_t> BlockFrames(int frames, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<uint8_t> out(static_cast<size_t>(frames) * kSide * kSide, 0);
  for (int f = 0; f < frames; ++f) {
    uint8_t* frame = out.data() + static_cast<size_t>(f) * kSide * kSide;
    for (int block = 0; block < 6; ++block) {
      const int y0 = static_cast<int>(random() % 10) * 8;
      const int x0 = static_cast<int>(random() % 10) * 8;
      const uint8_t gray = static_cast<uint8_t>(63 * (1 + random() % 4));
      for (int y = y0; y < y0 + 8 && y < kSide; ++y) {
        for (int x = x0; x < x0 + 8 && x < kSide; ++x) frame[y * kSide + x] = gray;
      }
    }
  }
  return out;
}

std::vector<uint8_t> Noise(size_t bytes, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<uint8_t> out(bytes);
  for (uint8_t& b : out) b = static_cast<uint8_t>(random());
  return out;
}

std::unique_ptr<FrameCodec> MakeCodec(CodecKind kind) {
  absl::StatusOr<std::unique_ptr<FrameCodec>> codec =
      FrameCodec::Create({kind, DefaultCodecLevel(kind)});
  EXPECT_TRUE(codec.ok()) << codec.status();
  return std::move(codec).value();
}

std::vector<uint8_t> CompressAll(FrameCodec& codec, const std::vector<uint8_t>& chunk) {
  std::vector<uint8_t> block(codec.MaxCompressedSize(chunk.size()));
  absl::StatusOr<size_t> n = codec.Compress(chunk, absl::MakeSpan(block));
  EXPECT_TRUE(n.ok()) << n.status();
  block.resize(n.ok() ? *n : 0);
  return block;
}

TEST(FrameCodecTest, EveryKindRoundTripsFramesAndNoiseByteForByte) {
  for (CodecKind kind : kKinds) {
    std::unique_ptr<FrameCodec> codec = MakeCodec(kind);
    for (const std::vector<uint8_t>& chunk : {BlockFrames(64, 1), Noise(100000, 2)}) {
      const std::vector<uint8_t> block = CompressAll(*codec, chunk);
      std::vector<uint8_t> back(chunk.size(), 0xAB);
      ASSERT_TRUE(codec->Decompress(block, absl::MakeSpan(back)).ok()) << CodecKindName(kind);
      EXPECT_EQ(back, chunk) << CodecKindName(kind);
    }
  }
}

TEST(FrameCodecTest, CompressorsShrinkBlockFramesTenfoldAndRawDoesNot) {
  const std::vector<uint8_t> frames = BlockFrames(64, 3);
  for (CodecKind kind : kKinds) {
    std::unique_ptr<FrameCodec> codec = MakeCodec(kind);
    const size_t compressed = CompressAll(*codec, frames).size();
    if (kind == CodecKind::kRaw) {
      EXPECT_EQ(compressed, frames.size());
    } else {
      EXPECT_LT(compressed * 10, frames.size()) << CodecKindName(kind);
    }
  }
}

TEST(FrameCodecTest, ACodecIsReusableAcrossChunks) {
  std::unique_ptr<FrameCodec> codec = MakeCodec(CodecKind::kZstd);
  for (uint32_t seed = 0; seed < 5; ++seed) {
    const std::vector<uint8_t> chunk = BlockFrames(1 + seed, seed);
    const std::vector<uint8_t> block = CompressAll(*codec, chunk);
    std::vector<uint8_t> back(chunk.size());
    ASSERT_TRUE(codec->Decompress(block, absl::MakeSpan(back)).ok());
    EXPECT_EQ(back, chunk);
  }
}

TEST(FrameCodecTest, ACorruptBlockIsDataLoss) {
  const std::vector<uint8_t> chunk = BlockFrames(8, 4);
  for (CodecKind kind : {CodecKind::kLz4, CodecKind::kLz4Hc, CodecKind::kZstd}) {
    std::unique_ptr<FrameCodec> codec = MakeCodec(kind);
    std::vector<uint8_t> block = CompressAll(*codec, chunk);
    std::vector<uint8_t> back(chunk.size());
    std::vector<uint8_t> truncated(block.begin(), block.begin() + block.size() / 2);
    EXPECT_TRUE(absl::IsDataLoss(codec->Decompress(truncated, absl::MakeSpan(back))))
        << CodecKindName(kind);
    std::vector<uint8_t> garbage = Noise(block.size(), 5);
    EXPECT_TRUE(absl::IsDataLoss(codec->Decompress(garbage, absl::MakeSpan(back))))
        << CodecKindName(kind);
  }
}

TEST(FrameCodecTest, ABlockOfAnotherSizeIsDataLoss) {
  const std::vector<uint8_t> chunk = BlockFrames(8, 6);
  for (CodecKind kind : kKinds) {
    std::unique_ptr<FrameCodec> codec = MakeCodec(kind);
    const std::vector<uint8_t> block = CompressAll(*codec, chunk);
    std::vector<uint8_t> larger(chunk.size() + 1);
    std::vector<uint8_t> smaller(chunk.size() - 1);
    EXPECT_TRUE(absl::IsDataLoss(codec->Decompress(block, absl::MakeSpan(larger))))
        << CodecKindName(kind);
    EXPECT_TRUE(absl::IsDataLoss(codec->Decompress(block, absl::MakeSpan(smaller))))
        << CodecKindName(kind);
  }
}

TEST(FrameCodecTest, CompressRefusesAnEmptyChunkAndABlockBelowTheBound) {
  std::unique_ptr<FrameCodec> codec = MakeCodec(CodecKind::kLz4);
  std::vector<uint8_t> block(64);
  EXPECT_TRUE(absl::IsInvalidArgument(codec->Compress({}, absl::MakeSpan(block)).status()));
  const std::vector<uint8_t> chunk = BlockFrames(1, 7);
  EXPECT_TRUE(absl::IsInvalidArgument(codec->Compress(chunk, absl::MakeSpan(block)).status()));
}

TEST(FrameCodecTest, OptionsParseKindAndLevelAndRefuseWhatIsOutOfRange) {
  absl::StatusOr<CodecOptions> zstd = ParseCodecOptions("zstd:3");
  ASSERT_TRUE(zstd.ok()) << zstd.status();
  EXPECT_EQ(zstd->kind, CodecKind::kZstd);
  EXPECT_EQ(zstd->level, 3);
  EXPECT_EQ(zstd->ToString(), "zstd:3");
  absl::StatusOr<CodecOptions> lz4 = ParseCodecOptions("lz4");
  ASSERT_TRUE(lz4.ok());
  EXPECT_EQ(lz4->level, DefaultCodecLevel(CodecKind::kLz4));
  EXPECT_EQ(ParseCodecOptions("raw")->ToString(), "raw");
  EXPECT_TRUE(absl::IsInvalidArgument(ParseCodecOptions("gzip").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseCodecOptions("zstd:x").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseCodecOptions("zstd:99").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseCodecOptions("lz4hc:13").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseCodecOptions("lz4:0").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseCodecOptions("raw:1").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(FrameCodec::Create({CodecKind::kZstd, 99}).status()));
}

}  // namespace
}  // namespace dreplay
