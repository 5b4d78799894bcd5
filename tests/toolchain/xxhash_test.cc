// libxxhash links; XXH3 and XXH64 give their published values.
#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"
#include "xxhash.h"

namespace {

TEST(XxhashToolchainTest, KnownValuesOfTheEmptyInput) {
  // Published test vectors of the xxHash specification, seed 0.
  EXPECT_EQ(XXH3_64bits("", 0), 0x2D06800538D394C2ULL);
  EXPECT_EQ(XXH64("", 0, 0), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(XXH32("", 0, 0), 0x02CC5D05U);
}

TEST(XxhashToolchainTest, StreamingMatchesOneShotAndDetectsAFlippedBit) {
  char data[1000];
  for (int i = 0; i < 1000; ++i) data[i] = static_cast<char>(i * 31 + 7);
  const XXH64_hash_t one_shot = XXH3_64bits(data, sizeof(data));
  XXH3_state_t* state = XXH3_createState();
  ASSERT_NE(state, nullptr);
  ASSERT_EQ(XXH3_64bits_reset(state), XXH_OK);
  ASSERT_EQ(XXH3_64bits_update(state, data, 300), XXH_OK);
  ASSERT_EQ(XXH3_64bits_update(state, data + 300, 700), XXH_OK);
  EXPECT_EQ(XXH3_64bits_digest(state), one_shot);
  XXH3_freeState(state);
  data[500] ^= 1;
  EXPECT_NE(XXH3_64bits(data, sizeof(data)), one_shot);
}

}  // namespace
