// Copyright dreplay authors.

#include "verbs/options.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dreplay::verbs {
namespace {

using ::testing::HasSubstr;

TEST(ProviderKindTest, ParsesTheThreeNamesAndRefusesOthers) {
  EXPECT_EQ(*ParseProviderKind("auto"), ProviderKind::kAuto);
  EXPECT_EQ(*ParseProviderKind("ibverbs"), ProviderKind::kIbverbs);
  EXPECT_EQ(*ParseProviderKind("soft"), ProviderKind::kSoft);
  auto bad = ParseProviderKind("rxe");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("rxe"));
  EXPECT_STREQ(ProviderKindName(ProviderKind::kSoft), "soft");
}

TEST(ProviderOptionsTest, DefaultsAreValidAndBadValuesAreNamed) {
  ProviderOptions options;
  EXPECT_TRUE(options.Validate().ok());
  options.ib_port = 0;
  EXPECT_THAT(options.Validate().message(), HasSubstr("ib_port = 0"));
  options = ProviderOptions();
  options.gid_index = -2;
  EXPECT_THAT(options.Validate().message(), HasSubstr("gid_index = -2"));
}

TEST(ProviderOptionsTest, TrafficClassIsAnEightBitField) {
  ProviderOptions options;
  EXPECT_EQ(options.traffic_class, 0);
  options.traffic_class = 255;
  EXPECT_TRUE(options.Validate().ok());
  options.traffic_class = 256;
  EXPECT_THAT(options.Validate().message(), HasSubstr("traffic_class = 256"));
}

TEST(QueuePairOptionsTest, DefaultRnrRetryIsFinite) {
  // 7 is "retry forever" on hardware.
  EXPECT_LT(QueuePairOptions().rnr_retry, kInfiniteRnrRetry);
  EXPECT_EQ(QueuePairOptions().rnr_retry, kDefaultRnrRetry);
}

TEST(LinkModelTest, PresetsHaveTheirDelayAndBandwidth) {
  auto none = ParseLinkModel("none");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->enabled());
  auto metro = ParseLinkModel("10km-25g");
  ASSERT_TRUE(metro.ok());
  EXPECT_EQ(metro->one_way_delay, absl::Microseconds(50));
  EXPECT_EQ(metro->bandwidth_gbps, 25);
  auto regional = ParseLinkModel("100km-10g");
  ASSERT_TRUE(regional.ok());
  EXPECT_EQ(regional->one_way_delay, absl::Microseconds(500));
  EXPECT_EQ(regional->bandwidth_gbps, 10);
  auto far = ParseLinkModel("1000km-1g");
  ASSERT_TRUE(far.ok());
  EXPECT_EQ(far->one_way_delay, absl::Milliseconds(5));
  EXPECT_EQ(far->bandwidth_gbps, 1);
}

TEST(LinkModelTest, ParsesDelayAndBandwidth) {
  auto model = ParseLinkModel("50:25");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->one_way_delay, absl::Microseconds(50));
  EXPECT_EQ(model->bandwidth_gbps, 25);
  EXPECT_TRUE(model->enabled());
  auto fractional = ParseLinkModel("2.5:0.5");
  ASSERT_TRUE(fractional.ok());
  EXPECT_EQ(fractional->one_way_delay, absl::Nanoseconds(2500));
  EXPECT_EQ(fractional->bandwidth_gbps, 0.5);
}

TEST(LinkModelTest, RefusesMalformedSpecsNamingThem) {
  for (const char* spec :
       {"fast", "50", "50:", ":25", "a:b", "50:25:1", "-5:10", "50:-1", "50:1e9", "1e12:1"}) {
    auto model = ParseLinkModel(spec);
    EXPECT_FALSE(model.ok()) << spec;
    EXPECT_THAT(model.status().message(), HasSubstr(spec));
  }
}

TEST(LinkModelTest, ValidateNamesTheBadField) {
  LinkModel model;
  model.jitter = absl::Microseconds(-1);
  EXPECT_THAT(model.Validate().message(), HasSubstr("jitter"));
  model = LinkModel();
  model.bandwidth_gbps = -3;
  EXPECT_THAT(model.Validate().message(), HasSubstr("bandwidth_gbps = -3"));
}

TEST(FaultOptionsTest, StallNeedsADuration) {
  FaultOptions faults;
  EXPECT_TRUE(faults.Validate().ok());
  EXPECT_FALSE(faults.enabled());
  faults.stall_after_ops = 3;
  EXPECT_THAT(faults.Validate().message(), HasSubstr("stall_after_ops = 3"));
  faults.stall_for = absl::Milliseconds(5);
  EXPECT_TRUE(faults.Validate().ok());
  EXPECT_TRUE(faults.enabled());
}

TEST(QueuePairOptionsTest, DefaultsAreValidAndBadValuesAreNamed) {
  QueuePairOptions options;
  EXPECT_TRUE(options.Validate().ok());
  options.max_send_wr = 0;
  EXPECT_THAT(options.Validate().message(), HasSubstr("max_send_wr = 0"));
  options = QueuePairOptions();
  options.max_rd_atomic = 300;
  EXPECT_THAT(options.Validate().message(), HasSubstr("max_rd_atomic = 300"));
  options = QueuePairOptions();
  options.retry_cnt = 8;
  EXPECT_THAT(options.Validate().message(), HasSubstr("retry_cnt = 8"));
  options = QueuePairOptions();
  options.connect_timeout = absl::ZeroDuration();
  EXPECT_THAT(options.Validate().message(), HasSubstr("connect_timeout"));
  options = QueuePairOptions();
  options.link.one_way_delay = absl::Seconds(60);
  EXPECT_THAT(options.Validate().message(), HasSubstr("one_way_delay"));
}

}  // namespace
}  // namespace dreplay::verbs
