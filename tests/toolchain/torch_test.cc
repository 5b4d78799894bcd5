// libtorch links and trains: a tensor operation, an autograd step and one
// optimiser step, on the CPU.
#include <torch/torch.h>

#include "gtest/gtest.h"

namespace {

TEST(TorchToolchainTest, MatmulMatchesHandComputedValues) {
  torch::Tensor a = torch::tensor({{1.0f, 2.0f}, {3.0f, 4.0f}});
  torch::Tensor b = torch::tensor({{5.0f}, {6.0f}});
  torch::Tensor c = torch::matmul(a, b);
  ASSERT_EQ(c.sizes(), (std::vector<int64_t>{2, 1}));
  EXPECT_FLOAT_EQ(c[0][0].item<float>(), 17.0f);
  EXPECT_FLOAT_EQ(c[1][0].item<float>(), 39.0f);
}

TEST(TorchToolchainTest, AutogradGivesTheDerivativeAndSgdDescends) {
  torch::Tensor x = torch::tensor({1.0f, -2.0f, 3.0f}, torch::requires_grad());
  torch::optim::SGD sgd({x}, torch::optim::SGDOptions(0.25));
  sgd.zero_grad();
  torch::Tensor loss = (x * x).sum();  // d/dx = 2x
  loss.backward();
  EXPECT_FLOAT_EQ(x.grad()[0].item<float>(), 2.0f);
  EXPECT_FLOAT_EQ(x.grad()[1].item<float>(), -4.0f);
  EXPECT_FLOAT_EQ(x.grad()[2].item<float>(), 6.0f);
  sgd.step();  // x <- x - 0.25 * 2x = 0.5 x
  EXPECT_FLOAT_EQ(x[0].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(x[1].item<float>(), -1.0f);
  EXPECT_LT((x * x).sum().item<float>(), loss.item<float>());
}

}  // namespace
