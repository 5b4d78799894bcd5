// Copyright dreplay authors.

#include "common/json_writer.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace dreplay {
namespace {

TEST(JsonStringTest, LeavesOrdinaryTextAlone) {
  EXPECT_EQ(JsonString("CartPole-v1 n=3"), "\"CartPole-v1 n=3\"");
  EXPECT_EQ(JsonString(""), "\"\"");
}

TEST(JsonStringTest, EscapesQuotesAndBackslashes) {
  EXPECT_EQ(JsonString("a\"b\\c"), "\"a\\\"b\\\\c\"");
}

TEST(JsonStringTest, EscapesEveryControlCharacterAsUnicode) {
  EXPECT_EQ(JsonString("a\nb\tc\rd"), "\"a\\u000ab\\u0009c\\u000dd\"");
  EXPECT_EQ(JsonString(std::string(1, '\0')), "\"\\u0000\"");
  EXPECT_EQ(JsonString("\x1f"), "\"\\u001f\"");
  for (int c = 0; c < 0x20; ++c) {
    const std::string escaped = JsonString(std::string(1, static_cast<char>(c)));
    EXPECT_EQ(escaped.size(), 8u) << c;
    EXPECT_EQ(escaped.substr(0, 5), "\"\\u00") << c;
  }
}

TEST(JsonStringTest, PassesUtf8AndDeleteThrough) {
  EXPECT_EQ(JsonString("\xc3\xa9\x7f"), "\"\xc3\xa9\x7f\"");
}

TEST(JsonObjectTest, EmptyObjectIsBraces) { EXPECT_EQ(JsonObject().Done(), "{}"); }

TEST(JsonObjectTest, WritesFieldsInOrderWithTheirTypes) {
  const std::string json = JsonObject()
                               .Add("type", "progress")
                               .Add("name", std::string("x\"y"))
                               .Add("steps", uint64_t{18446744073709551615u})
                               .Add("lease", uint32_t{7})
                               .Add("delta", int64_t{-3})
                               .Add("ok", true)
                               .Add("no", false)
                               .Add("loss", 0.25)
                               .Done();
  EXPECT_EQ(json,
            "{\"type\":\"progress\",\"name\":\"x\\\"y\",\"steps\":18446744073709551615,"
            "\"lease\":7,\"delta\":-3,\"ok\":true,\"no\":false,\"loss\":0.25}");
}

TEST(JsonObjectTest, WritesDoublesWithTheChosenDigits) {
  EXPECT_EQ(JsonObject().Add("x", 1.0 / 3).Done(), "{\"x\":0.3333333333}");
  EXPECT_EQ(JsonObject(6).Add("x", 1.0 / 3).Done(), "{\"x\":0.333333}");
  EXPECT_EQ(JsonObject(6).Add("x", 1234567.0).Done(), "{\"x\":1.23457e+06}");
}

TEST(JsonObjectTest, WritesNonFiniteAndEmptyAsNull) {
  EXPECT_EQ(JsonObject()
                .Add("nan", std::nan(""))
                .Add("inf", std::numeric_limits<double>::infinity())
                .Add("d", std::optional<double>())
                .Add("u", std::optional<uint64_t>())
                .Add("d1", std::optional<double>(1.5))
                .Add("u1", std::optional<uint64_t>(9))
                .Done(),
            "{\"nan\":null,\"inf\":null,\"d\":null,\"u\":null,\"d1\":1.5,\"u1\":9}");
}

TEST(JsonObjectTest, WritesRawJsonAsGiven) {
  const std::string inner = JsonObject().Add("a", uint64_t{1}).Done();
  EXPECT_EQ(JsonObject().AddRaw("inner", inner).AddRaw("list", "[1,2]").Done(),
            "{\"inner\":{\"a\":1},\"list\":[1,2]}");
}

TEST(JsonObjectTest, EscapesKeysToo) {
  EXPECT_EQ(JsonObject().Add("a\nb", uint64_t{1}).Done(), "{\"a\\u000ab\":1}");
}

}  // namespace
}  // namespace dreplay
