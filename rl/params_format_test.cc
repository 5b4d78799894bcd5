// Copyright dreplay authors.

#include "rl/params_format.h"

#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace dreplay::rl {
namespace {

const std::vector<std::vector<int64_t>> kShapes = {{8, 4}, {8}, {2, 8}, {2}};

TEST(ParamsShapeHashTest, DependsOnEveryDimensionAndTheGrouping) {
  const uint64_t hash = ParamsShapeHash(kShapes);
  EXPECT_EQ(hash, ParamsShapeHash(kShapes));
  EXPECT_NE(hash, ParamsShapeHash({{8, 4}, {8}, {3, 8}, {3}}));
  EXPECT_NE(hash, ParamsShapeHash({{4, 8}, {8}, {2, 8}, {2}}));
  // Same number of values, grouped differently.
  EXPECT_NE(ParamsShapeHash({{2, 3}}), ParamsShapeHash({{6}}));
  EXPECT_NE(ParamsShapeHash({{2}, {3}}), ParamsShapeHash({{2, 3}}));
}

TEST(ParamsFormatTest, WriteThenReadRoundTrips) {
  const std::vector<float> values = {1.5f, -2.0f, 0.0f, 3.25f, 1e-30f};
  std::vector<uint8_t> buffer(ParamsBufferSize(values.size()) + 16);
  absl::StatusOr<size_t> written =
      WriteParams(0x1234, /*version=*/77, values, absl::MakeSpan(buffer));
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, 32u + 20u);

  absl::StatusOr<ParamsHeader> header = ReadParamsHeader(buffer);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->shape_hash, 0x1234u);
  EXPECT_EQ(header->version, 77u);
  EXPECT_EQ(header->count, 5u);

  std::vector<float> read(values.size());
  absl::StatusOr<uint64_t> version = ReadParams(buffer, 0x1234, absl::MakeSpan(read));
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 77u);
  EXPECT_EQ(read, values);
}

TEST(ParamsFormatTest, CheckParamsFiniteNamesTheFirstValueThatIsNot) {
  std::vector<float> values = {1.5f, -2.0f, 1e-40f, -0.0f, 3e38f};
  std::vector<uint8_t> buffer(ParamsBufferSize(values.size()));
  ASSERT_TRUE(WriteParams(0x1234, 5, values, absl::MakeSpan(buffer)).ok());
  EXPECT_TRUE(CheckParamsFinite(buffer).ok());
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity()}) {
    values[3] = bad;
    ASSERT_TRUE(WriteParams(0x1234, 5, values, absl::MakeSpan(buffer)).ok());
    const absl::Status status = CheckParamsFinite(buffer);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_NE(status.message().find("parameter 3 of 5"), absl::string_view::npos) << status;
  }
  EXPECT_FALSE(CheckParamsFinite(absl::MakeConstSpan(buffer).first(10)).ok());
}

TEST(ParamsFormatTest, WriteRejectsASmallBuffer) {
  const std::vector<float> values(10, 1.0f);
  std::vector<uint8_t> buffer(ParamsBufferSize(10) - 1);
  EXPECT_EQ(WriteParams(1, 1, values, absl::MakeSpan(buffer)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

class ParamsReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    buffer_.resize(ParamsBufferSize(values_.size()));
    ASSERT_TRUE(WriteParams(kHash, 3, values_, absl::MakeSpan(buffer_)).ok());
  }
  static constexpr uint64_t kHash = 0xfeed;
  std::vector<float> values_ = {1.0f, 2.0f, 3.0f, 4.0f};
  std::vector<uint8_t> buffer_;
};

TEST_F(ParamsReadTest, RejectsAnotherShapeAndLeavesValuesUnchanged) {
  std::vector<float> read(4, -1.0f);
  EXPECT_EQ(ReadParams(buffer_, kHash + 1, absl::MakeSpan(read)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(read, std::vector<float>(4, -1.0f));
}

TEST_F(ParamsReadTest, RejectsAnotherCount) {
  std::vector<float> read(5);
  EXPECT_EQ(ReadParams(buffer_, kHash, absl::MakeSpan(read)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(ParamsReadTest, RejectsAnotherFormatVersion) {
  const uint32_t future = kParamsFormatVersion + 1;
  std::memcpy(&buffer_[4], &future, sizeof(future));
  std::vector<float> read(4);
  EXPECT_EQ(ReadParams(buffer_, kHash, absl::MakeSpan(read)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(ParamsReadTest, RejectsABadMagic) {
  buffer_[0] ^= 0xff;
  EXPECT_EQ(ReadParamsHeader(buffer_).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ParamsReadTest, RejectsABufferShorterThanItsValues) {
  std::vector<float> read(4);
  EXPECT_EQ(ReadParams(absl::MakeConstSpan(buffer_.data(), buffer_.size() - 1), kHash,
                       absl::MakeSpan(read))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadParamsHeader(absl::MakeConstSpan(buffer_.data(), 31)).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A count so large that count * 4 would overflow.
  const uint64_t huge = ~0ull / 2;
  std::memcpy(&buffer_[24], &huge, sizeof(huge));
  EXPECT_EQ(ReadParamsHeader(buffer_).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dreplay::rl
