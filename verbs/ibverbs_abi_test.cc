// Copyright dreplay authors.
//
// This test is linked dynamically on purpose (see its BUILD rule): each
// library's shared object is then linked without -libverbs, so its verbs bind
// to libibverbs' IBVERBS_1.0 compatibility versions, on which the current
// verbs crash. The provider must refuse that with a clear error, on any host,
// before it touches a device.

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verbs/ibverbs_provider.h"

namespace dreplay::verbs {
namespace {

using ::testing::HasSubstr;

TEST(IbverbsAbiTest, ProviderRefusesTheCompatibilityVerbsInsteadOfCrashing) {
  auto provider = CreateIbverbsProvider(ProviderOptions());
  ASSERT_FALSE(provider.ok());
  EXPECT_TRUE(absl::IsInternal(provider.status())) << provider.status();
  EXPECT_THAT(std::string(provider.status().message()), HasSubstr("IBVERBS_1.0"));
}

}  // namespace
}  // namespace dreplay::verbs
