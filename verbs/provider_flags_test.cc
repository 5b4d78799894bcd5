// Copyright dreplay authors.

#include "verbs/provider_flags.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dreplay::verbs {
namespace {

using ::testing::HasSubstr;

TEST(ProviderFlagsTest, TheFlagsDefaultsGiveTheAutomaticProvider) {
  const absl::StatusOr<ProviderOptions> options = ProviderOptionsFromFlags({});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->kind, ProviderKind::kAuto);
  EXPECT_EQ(options->ib_port, 1);
  EXPECT_EQ(options->gid_index, -1);
}

TEST(ProviderFlagsTest, CopiesTheIbverbsSettings) {
  const absl::StatusOr<ProviderOptions> options =
      ProviderOptionsFromFlags({"ibverbs", "mlx5_0", 2, 3});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->kind, ProviderKind::kIbverbs);
  EXPECT_EQ(options->ib_device, "mlx5_0");
  EXPECT_EQ(options->ib_port, 2);
  EXPECT_EQ(options->gid_index, 3);
}

TEST(ProviderFlagsTest, NamesTheBadFlag) {
  const absl::Status kind = ProviderOptionsFromFlags({"rxe", "", 1, -1}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(kind));
  EXPECT_THAT(kind.message(), HasSubstr("--provider=rxe: "));
  const absl::Status port = ProviderOptionsFromFlags({"soft", "", 0, -1}).status();
  EXPECT_THAT(port.message(), HasSubstr("bad ibverbs flag: "));
  EXPECT_THAT(port.message(), HasSubstr("ib_port = 0"));
}

TEST(ProviderFlagsTest, CopiesTheSoftTransportAndNamesABadOne) {
  ProviderFlags flags;
  EXPECT_EQ(ProviderOptionsFromFlags(flags)->soft_transport, SoftTransport::kAuto);
  flags.soft_transport = "tcp";
  EXPECT_EQ(ProviderOptionsFromFlags(flags)->soft_transport, SoftTransport::kTcp);
  flags.soft_transport = "shm";
  const absl::Status bad = ProviderOptionsFromFlags(flags).status();
  EXPECT_TRUE(absl::IsInvalidArgument(bad));
  EXPECT_THAT(bad.message(), HasSubstr("--soft_transport=shm: "));
}

TEST(ProviderFlagsTest, CopiesTheSoftLinkReleaseAndNamesABadOne) {
  ProviderFlags flags;
  EXPECT_EQ(ProviderOptionsFromFlags(flags)->soft_link_release, SoftLinkRelease::kAuto);
  flags.soft_link_release = "receiver";
  EXPECT_EQ(ProviderOptionsFromFlags(flags)->soft_link_release, SoftLinkRelease::kReceiver);
  flags.soft_link_release = "sender";
  EXPECT_EQ(ProviderOptionsFromFlags(flags)->soft_link_release, SoftLinkRelease::kSender);
  flags.soft_link_release = "peer";
  const absl::Status bad = ProviderOptionsFromFlags(flags).status();
  EXPECT_TRUE(absl::IsInvalidArgument(bad));
  EXPECT_THAT(bad.message(), HasSubstr("--soft_link_release=peer: "));
}

TEST(ProviderFlagsTest, CopiesTheTrafficClass) {
  ProviderFlags flags;
  EXPECT_EQ(ProviderOptionsFromFlags(flags)->traffic_class, 0);
  flags.traffic_class = 106;  // DSCP 26, ECT(0)
  const absl::StatusOr<ProviderOptions> options = ProviderOptionsFromFlags(flags);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->traffic_class, 106);
}

TEST(ProviderFlagsTest, RefusesATrafficClassWiderThanEightBits) {
  ProviderFlags flags;
  flags.traffic_class = 256;
  const absl::Status s = ProviderOptionsFromFlags(flags).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("traffic_class = 256"));
  flags.traffic_class = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(ProviderOptionsFromFlags(flags).status()));
}

TEST(ProviderFlagsTest, AppliesAnRnrRetryOfZeroToSevenAndNamesABadOne) {
  ProviderFlags flags;
  QueuePairOptions qp;
  ASSERT_TRUE(ApplyQueuePairFlags(flags, &qp).ok());
  EXPECT_EQ(qp.rnr_retry, kDefaultRnrRetry);
  flags.rnr_retry = 0;
  ASSERT_TRUE(ApplyQueuePairFlags(flags, &qp).ok());
  EXPECT_EQ(qp.rnr_retry, 0);
  flags.rnr_retry = 7;
  ASSERT_TRUE(ApplyQueuePairFlags(flags, &qp).ok());
  EXPECT_EQ(qp.rnr_retry, 7);
  for (int bad : {-1, 8}) {
    flags.rnr_retry = bad;
    const absl::Status s = ApplyQueuePairFlags(flags, &qp);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad;
    EXPECT_THAT(s.message(), HasSubstr("--rnr_retry=")) << s;
    EXPECT_TRUE(absl::IsInvalidArgument(ProviderOptionsFromFlags(flags).status())) << bad;
  }
  EXPECT_EQ(qp.rnr_retry, 7);  // a refused value changes nothing
}

}  // namespace
}  // namespace dreplay::verbs
