// Copyright dreplay authors.

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "verbs/verbs.h"

namespace dreplay::verbs {
namespace {

TEST(CreateProviderTest, SoftIsAlwaysAvailable) {
  ProviderOptions options;
  options.kind = ProviderKind::kSoft;
  auto provider = CreateProvider(options);
  ASSERT_TRUE(provider.ok()) << provider.status();
  EXPECT_EQ((*provider)->name(), "soft");
}

TEST(CreateProviderTest, AutoPicksIbverbsOnlyWhenADeviceIsPresent) {
  std::string why;
  const bool device = RdmaDeviceAvailable(&why);
  EXPECT_FALSE(why.empty());
  ProviderOptions options;
  options.kind = ProviderKind::kAuto;
  auto provider = CreateProvider(options);
  ASSERT_TRUE(provider.ok()) << provider.status();
  if (!device) {
    EXPECT_EQ((*provider)->name(), "soft") << why;
  } else {
    // A listed device may still be unusable (no active port): then soft.
    EXPECT_TRUE((*provider)->name() == "ibverbs" || (*provider)->name() == "soft");
  }
}

TEST(CreateProviderTest, IbverbsWithoutADeviceFailsCleanly) {
  if (RdmaDeviceAvailable()) GTEST_SKIP() << "this host has an RDMA device";
  ProviderOptions options;
  options.kind = ProviderKind::kIbverbs;
  auto provider = CreateProvider(options);
  EXPECT_FALSE(provider.ok());
}

TEST(CreateProviderTest, InvalidOptionsAreRefused) {
  ProviderOptions options;
  options.kind = ProviderKind::kSoft;
  options.ib_port = 0;
  EXPECT_EQ(CreateProvider(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dreplay::verbs
