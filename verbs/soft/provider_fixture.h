// Copyright dreplay authors.
//
// provider_fixture.h: the fixture of the soft provider's tests
// (provider_test.cc: data, ordering and atomicity; provider_errors_test.cc:
// access checks, errors, credits, setup and teardown): a client and a server
// provider, connected queue pairs over loopback, registered buffers.

#ifndef DREPLAY_VERBS_SOFT_PROVIDER_FIXTURE_H_
#define DREPLAY_VERBS_SOFT_PROVIDER_FIXTURE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "gtest/gtest.h"
#include "verbs/soft/provider.h"
#include "verbs/soft/test_util.h"

namespace dreplay::verbs::testing {

inline constexpr uint32_t kAllRemote = kLocalWrite | kRemoteRead | kRemoteWrite | kRemoteAtomic;

inline void FillPattern(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) {
    p[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
  }
}

class SoftProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto client = CreateSoftProvider(TestProviderOptions());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    auto server = CreateSoftProvider(TestProviderOptions());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  QpPair Connect(const QueuePairOptions& client_options = {},
                 const QueuePairOptions& server_options = {}) {
    auto pair = ConnectPair(client_.get(), server_.get(), client_options, server_options);
    EXPECT_TRUE(pair.ok()) << pair.status();
    return pair.ok() ? std::move(*pair) : QpPair{};
  }

  std::unique_ptr<Buffer> Make(Provider* p, size_t n, uint32_t access) {
    auto b = MakeBuffer(p, n, access);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? std::move(*b) : nullptr;
  }

  // Posts `wr` and waits for its one completion.
  Completion RunOne(QueuePair* qp, const WorkRequest& wr) {
    EXPECT_TRUE(qp->PostSend({&wr, 1}).ok());
    auto done = PollCompletions(qp, 1);
    EXPECT_EQ(done.size(), 1u);
    return done.empty() ? Completion{} : done[0];
  }

  std::unique_ptr<Provider> client_;
  std::unique_ptr<Provider> server_;
};

}  // namespace dreplay::verbs::testing

#endif  // DREPLAY_VERBS_SOFT_PROVIDER_FIXTURE_H_
