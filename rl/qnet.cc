// Copyright dreplay authors.

#include "rl/qnet.h"

#include <ATen/Parallel.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "rl/params_format.h"
#include "rl/qnet_module.h"
#include "rl/random.h"

namespace dreplay::rl {
namespace {

std::vector<int64_t> LayerWidths(const QNetworkOptions& options) {
  std::vector<int64_t> widths = {options.observation_size};
  widths.insert(widths.end(), options.hidden_sizes.begin(), options.hidden_sizes.end());
  widths.push_back(options.action_count);
  return widths;
}

// A torch view of caller memory. The tensor must not outlive `values` and is
// only read.
torch::Tensor ConstView(absl::Span<const float> values, torch::IntArrayRef sizes) {
  return torch::from_blob(const_cast<float*>(values.data()), sizes,
                          torch::TensorOptions().dtype(torch::kFloat32));
}

}  // namespace

absl::Status QNetworkOptions::Validate() const {
  if (observation_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("QNetwork observation_size must be > 0, got ", observation_size));
  }
  if (action_count <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("QNetwork action_count must be > 0, got ", action_count));
  }
  for (size_t i = 0; i < hidden_sizes.size(); ++i) {
    if (hidden_sizes[i] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("QNetwork hidden_sizes[", i, "] must be > 0, got ", hidden_sizes[i]));
    }
  }
  return absl::OkStatus();
}

void SetTorchThreads(int threads) {
  CHECK_GE(threads, 1);
  at::set_num_threads(threads);
}

QNetwork::Module::Module(const std::vector<int64_t>& widths) {
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    layers_.push_back(
        register_module(absl::StrCat("fc", i),
                        torch::nn::Linear(torch::nn::LinearOptions(widths[i], widths[i + 1]))));
  }
}

torch::Tensor QNetwork::Module::Forward(const torch::Tensor& observations) {
  torch::Tensor x = observations;
  for (size_t i = 0; i < layers_.size(); ++i) {
    x = layers_[i]->forward(x);
    if (i + 1 < layers_.size()) x = torch::relu(x);
  }
  return x;
}

absl::StatusOr<std::unique_ptr<QNetwork>> QNetwork::Create(const QNetworkOptions& options,
                                                           uint64_t seed) {
  RETURN_IF_ERROR(options.Validate());
  auto module = std::make_unique<Module>(LayerWidths(options));
  // torch.nn.Linear's default initialisation, from our own generator: every
  // weight and bias uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)).
  Random random(seed);
  torch::NoGradGuard no_grad;
  const std::vector<int64_t> widths = LayerWidths(options);
  std::vector<torch::Tensor> params = module->parameters();
  CHECK_EQ(params.size(), 2 * (widths.size() - 1));
  for (size_t layer = 0; layer + 1 < widths.size(); ++layer) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(widths[layer]));
    for (torch::Tensor* p : {&params[2 * layer], &params[2 * layer + 1]}) {
      CHECK(p->is_contiguous());
      float* data = p->data_ptr<float>();
      for (int64_t i = 0; i < p->numel(); ++i) {
        data[i] = static_cast<float>(random.Uniform(-bound, bound));
      }
    }
  }
  return std::unique_ptr<QNetwork>(new QNetwork(options, std::move(module)));
}

namespace {

size_t CountParameters(QNetwork::Module& module) {
  size_t count = 0;
  for (const torch::Tensor& p : module.parameters()) count += p.numel();
  return count;
}

uint64_t HashShapes(QNetwork::Module& module) {
  std::vector<std::vector<int64_t>> shapes;
  for (const torch::Tensor& p : module.parameters()) {
    shapes.push_back(p.sizes().vec());
  }
  return ParamsShapeHash(shapes);
}

}  // namespace

QNetwork::QNetwork(const QNetworkOptions& options, std::unique_ptr<Module> module)
    : options_(options),
      module_(std::move(module)),
      parameter_count_(CountParameters(*module_)),
      shape_hash_(HashShapes(*module_)) {}

QNetwork::~QNetwork() = default;

absl::Status QNetwork::QValues(absl::Span<const float> observations,
                               absl::Span<float> q_values) const {
  const size_t obs_size = options_.observation_size;
  const size_t actions = options_.action_count;
  if (observations.size() % obs_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        observations.size(), " observation floats are not a whole number of rows of ", obs_size));
  }
  const size_t batch = observations.size() / obs_size;
  if (q_values.size() != batch * actions) {
    return absl::InvalidArgumentError(absl::StrCat("Q values for ", batch, " observations need ",
                                                   batch * actions, " floats, got ",
                                                   q_values.size()));
  }
  if (batch == 0) return absl::OkStatus();
  torch::NoGradGuard no_grad;
  const torch::Tensor q = module_
                              ->Forward(ConstView(observations, {static_cast<int64_t>(batch),
                                                                 static_cast<int64_t>(obs_size)}))
                              .contiguous();
  std::memcpy(q_values.data(), q.data_ptr<float>(), q_values.size() * sizeof(float));
  return absl::OkStatus();
}

absl::StatusOr<int> QNetwork::GreedyAction(absl::Span<const float> observation) const {
  if (observation.size() != static_cast<size_t>(options_.observation_size)) {
    return absl::InvalidArgumentError(absl::StrCat("observation of ", observation.size(),
                                                   " floats, network expects ",
                                                   options_.observation_size));
  }
  std::vector<float> q(options_.action_count);
  RETURN_IF_ERROR(QValues(observation, absl::MakeSpan(q)));
  int best = 0;
  for (int a = 1; a < options_.action_count; ++a) {
    if (q[a] > q[best]) best = a;
  }
  return best;
}

std::vector<float> QNetwork::GetParameters() const {
  std::vector<float> values;
  values.reserve(parameter_count_);
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& p : module_->parameters()) {
    const torch::Tensor c = p.contiguous();
    const float* data = c.data_ptr<float>();
    values.insert(values.end(), data, data + c.numel());
  }
  return values;
}

absl::Status QNetwork::SetParameters(absl::Span<const float> values) {
  if (values.size() != parameter_count_) {
    return absl::InvalidArgumentError(
        absl::StrCat("network has ", parameter_count_, " parameters, got ", values.size()));
  }
  torch::NoGradGuard no_grad;
  size_t offset = 0;
  for (torch::Tensor& p : module_->parameters()) {
    p.copy_(ConstView(values.subspan(offset, p.numel()), p.sizes()));
    offset += p.numel();
  }
  return absl::OkStatus();
}

absl::Status QNetwork::CopyParametersFrom(const QNetwork& other) {
  if (other.shape_hash_ != shape_hash_) {
    return absl::FailedPreconditionError(
        "cannot copy parameters between networks of different shapes");
  }
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> dst = module_->parameters();
  const std::vector<torch::Tensor> src = other.module_->parameters();
  for (size_t i = 0; i < dst.size(); ++i) dst[i].copy_(src[i]);
  return absl::OkStatus();
}

size_t QNetwork::SerializedSize() const { return ParamsBufferSize(parameter_count_); }

absl::StatusOr<size_t> QNetwork::Serialize(uint64_t version, absl::Span<uint8_t> out) const {
  return WriteParams(shape_hash_, version, GetParameters(), out);
}

absl::StatusOr<uint64_t> QNetwork::Load(absl::Span<const uint8_t> in) {
  std::vector<float> values(parameter_count_);
  ASSIGN_OR_RETURN(const uint64_t version, ReadParams(in, shape_hash_, absl::MakeSpan(values)));
  RETURN_IF_ERROR(SetParameters(values));
  return version;
}

}  // namespace dreplay::rl
