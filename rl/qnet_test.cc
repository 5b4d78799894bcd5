// Copyright dreplay authors.
//
// QNetwork through its torch-free interface.

#include "rl/qnet.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rl/params_format.h"

namespace dreplay::rl {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;

std::unique_ptr<QNetwork> MakeNetwork(int obs, int actions, std::vector<int> hidden,
                                      uint64_t seed) {
  QNetworkOptions options;
  options.observation_size = obs;
  options.action_count = actions;
  options.hidden_sizes = std::move(hidden);
  absl::StatusOr<std::unique_ptr<QNetwork>> net = QNetwork::Create(options, seed);
  EXPECT_TRUE(net.ok()) << net.status();
  return net.ok() ? *std::move(net) : nullptr;
}

TEST(QNetworkOptionsTest, ValidateNamesTheBadValue) {
  QNetworkOptions options;
  options.observation_size = 4;
  options.action_count = 2;
  EXPECT_TRUE(options.Validate().ok());
  options.hidden_sizes = {64, 0};
  EXPECT_EQ(options.Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(options.Validate().message()), ::testing::HasSubstr("hidden_sizes[1]"));
  options.hidden_sizes = {};
  options.action_count = 0;
  EXPECT_EQ(QNetwork::Create(options, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(QNetworkTest, CountsWeightsAndBiasesOfEveryLayer) {
  std::unique_ptr<QNetwork> net = MakeNetwork(4, 2, {8, 3}, 1);
  EXPECT_EQ(net->parameter_count(), 4u * 8 + 8 + 8 * 3 + 3 + 3 * 2 + 2);
  EXPECT_EQ(net->GetParameters().size(), net->parameter_count());
  EXPECT_EQ(net->SerializedSize(), ParamsBufferSize(net->parameter_count()));
}

TEST(QNetworkTest, InitialisationIsSeededAndWithinTheFanInBound) {
  std::unique_ptr<QNetwork> a = MakeNetwork(4, 2, {16}, 7);
  std::unique_ptr<QNetwork> b = MakeNetwork(4, 2, {16}, 7);
  std::unique_ptr<QNetwork> c = MakeNetwork(4, 2, {16}, 8);
  const std::vector<float> pa = a->GetParameters();
  EXPECT_EQ(pa, b->GetParameters());
  EXPECT_NE(pa, c->GetParameters());
  // First layer: 16 x 4 weights and 16 biases, bound 1/sqrt(4).
  for (size_t i = 0; i < 16 * 4 + 16; ++i) EXPECT_LE(std::abs(pa[i]), 0.5f);
  // Second layer: bound 1/sqrt(16).
  for (size_t i = 16 * 4 + 16; i < pa.size(); ++i) {
    EXPECT_LE(std::abs(pa[i]), 0.25f);
  }
}

TEST(QNetworkTest, ComputesTheMlpWithHandSetParameters) {
  std::unique_ptr<QNetwork> net = MakeNetwork(2, 2, {2}, 1);
  // W1 = [[1, 0], [0, -1]], b1 = [0, 0.5], W2 = [[1, 1], [2, -1]],
  // b2 = [0.1, -0.2].
  ASSERT_TRUE(net->SetParameters({1, 0, 0, -1, 0, 0.5f, 1, 1, 2, -1, 0.1f, -0.2f}).ok());
  // obs (3, 1): h = relu(3, -0.5) = (3, 0); q = (3.1, 5.8).
  // obs (-1, -2): h = relu(-1, 2.5) = (0, 2.5); q = (2.6, -2.7).
  std::vector<float> q(4);
  ASSERT_TRUE(net->QValues({3, 1, -1, -2}, absl::MakeSpan(q)).ok());
  EXPECT_THAT(q, ElementsAre(FloatNear(3.1f, 1e-6), FloatNear(5.8f, 1e-6), FloatNear(2.6f, 1e-6),
                             FloatNear(-2.7f, 1e-6)));
  EXPECT_EQ(*net->GreedyAction({3, 1}), 1);
  EXPECT_EQ(*net->GreedyAction({-1, -2}), 0);
}

TEST(QNetworkTest, GreedyActionBreaksTiesTowardsTheLowestIndex) {
  std::unique_ptr<QNetwork> net = MakeNetwork(2, 3, {4}, 1);
  ASSERT_TRUE(net->SetParameters(std::vector<float>(net->parameter_count(), 0.0f)).ok());
  EXPECT_EQ(*net->GreedyAction({1, 2}), 0);
}

TEST(QNetworkTest, RejectsSizesThatDoNotFit) {
  std::unique_ptr<QNetwork> net = MakeNetwork(2, 3, {4}, 1);
  std::vector<float> q(3);
  EXPECT_EQ(net->QValues({1, 2, 3}, absl::MakeSpan(q)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(net->QValues({1, 2, 3, 4}, absl::MakeSpan(q)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(net->GreedyAction({1, 2, 3}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(net->SetParameters({1, 2}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(QNetworkTest, SerializeThenLoadRoundTripsParametersAndVersion) {
  std::unique_ptr<QNetwork> source = MakeNetwork(4, 2, {32, 32}, 1);
  std::unique_ptr<QNetwork> dest = MakeNetwork(4, 2, {32, 32}, 2);
  std::vector<uint8_t> buffer(source->SerializedSize());
  absl::StatusOr<size_t> written = source->Serialize(/*version=*/41, absl::MakeSpan(buffer));
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, buffer.size());
  absl::StatusOr<uint64_t> version = dest->Load(buffer);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 41u);
  EXPECT_EQ(dest->GetParameters(), source->GetParameters());
  std::vector<float> qa(2), qb(2);
  ASSERT_TRUE(source->QValues({0.1f, 0.2f, 0.3f, 0.4f}, absl::MakeSpan(qa)).ok());
  ASSERT_TRUE(dest->QValues({0.1f, 0.2f, 0.3f, 0.4f}, absl::MakeSpan(qb)).ok());
  EXPECT_EQ(qa, qb);
}

TEST(QNetworkTest, LoadRefusesAnotherShapeAndKeepsItsParameters) {
  std::unique_ptr<QNetwork> wide = MakeNetwork(4, 2, {32}, 1);
  std::unique_ptr<QNetwork> narrow = MakeNetwork(4, 2, {16}, 2);
  std::vector<uint8_t> buffer(wide->SerializedSize());
  ASSERT_TRUE(wide->Serialize(1, absl::MakeSpan(buffer)).ok());
  const std::vector<float> before = narrow->GetParameters();
  EXPECT_EQ(narrow->Load(buffer).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(narrow->GetParameters(), before);
  // Same number of parameters, another architecture: 4 -> 2 and 1 -> 2 -> 2
  // both have 10.
  std::unique_ptr<QNetwork> linear = MakeNetwork(4, 2, {}, 1);
  std::unique_ptr<QNetwork> same_count = MakeNetwork(1, 2, {2}, 1);
  ASSERT_EQ(linear->parameter_count(), same_count->parameter_count());
  std::vector<uint8_t> linear_buffer(linear->SerializedSize());
  ASSERT_TRUE(linear->Serialize(1, absl::MakeSpan(linear_buffer)).ok());
  EXPECT_EQ(same_count->Load(linear_buffer).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(QNetworkTest, LoadRefusesAnotherFormatVersion) {
  std::unique_ptr<QNetwork> net = MakeNetwork(4, 2, {8}, 1);
  std::vector<uint8_t> buffer(net->SerializedSize());
  ASSERT_TRUE(net->Serialize(1, absl::MakeSpan(buffer)).ok());
  const uint32_t other = kParamsFormatVersion + 1;
  std::memcpy(&buffer[offsetof(ParamsHeader, format_version)], &other, sizeof(other));
  EXPECT_EQ(net->Load(buffer).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(QNetworkTest, CopyParametersFromMakesTheNetworksEqual) {
  std::unique_ptr<QNetwork> a = MakeNetwork(4, 2, {8}, 1);
  std::unique_ptr<QNetwork> b = MakeNetwork(4, 2, {8}, 2);
  ASSERT_TRUE(b->CopyParametersFrom(*a).ok());
  EXPECT_EQ(a->GetParameters(), b->GetParameters());
  std::unique_ptr<QNetwork> other = MakeNetwork(4, 3, {8}, 1);
  EXPECT_EQ(other->CopyParametersFrom(*a).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace dreplay::rl
