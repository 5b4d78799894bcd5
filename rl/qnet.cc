// Copyright dreplay authors.

#include "rl/qnet.h"

#include <ATen/Parallel.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "rl/make_environment.h"
#include "rl/params_format.h"
#include "rl/qnet_module.h"
#include "rl/random.h"

namespace dreplay::rl {
namespace {

// MinAtar's grid side and the Nature CNN's frame side.
constexpr int64_t kGridSide = 10;
constexpr int64_t kFrameSide = 84;

// One convolution of a torso: output channels, kernel side, stride.
struct ConvSpec {
  int64_t out;
  int64_t kernel;
  int64_t stride;
};

std::vector<ConvSpec> TorsoConvs(QNetworkTorso torso) {
  switch (torso) {
    case QNetworkTorso::kMlp:
      return {};
    case QNetworkTorso::kMinAtar:
      return {{16, 3, 1}};
    case QNetworkTorso::kNatureCnn:
      return {{32, 8, 4}, {64, 4, 2}, {64, 3, 1}};
  }
  return {};
}

// Values per observation a torso needs for `channels` input channels.
int64_t TorsoInputSize(QNetworkTorso torso, int64_t channels) {
  const int64_t side = torso == QNetworkTorso::kMinAtar ? kGridSide : kFrameSide;
  return channels * side * side;
}

// The width of the torso's output: the head's input.
int64_t TorsoOutputSize(const QNetworkOptions& options) {
  if (options.torso == QNetworkTorso::kMlp) return options.observation_size;
  int64_t side = options.torso == QNetworkTorso::kMinAtar ? kGridSide : kFrameSide;
  int64_t channels = options.input_channels;
  for (const ConvSpec& conv : TorsoConvs(options.torso)) {
    side = (side - conv.kernel) / conv.stride + 1;
    channels = conv.out;
  }
  return channels * side * side;
}

// Head widths: the torso's output, hidden..., action_count.
std::vector<int64_t> HeadWidths(const QNetworkOptions& options) {
  std::vector<int64_t> widths = {TorsoOutputSize(options)};
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

const char* QNetworkTorsoName(QNetworkTorso torso) {
  switch (torso) {
    case QNetworkTorso::kMlp:
      return "mlp";
    case QNetworkTorso::kMinAtar:
      return "minatar";
    case QNetworkTorso::kNatureCnn:
      return "nature_cnn";
  }
  return "unknown";
}

std::vector<int> DefaultHiddenSizes(const EnvironmentSpec& env) {
  switch (env.observation_layout) {
    case ObservationLayout::kVector:
      return {64, 64};
    case ObservationLayout::kGrid10x10:
      return {128};
    case ObservationLayout::kPixels84:
      return {512};
  }
  return {64, 64};
}

absl::StatusOr<std::vector<int>> DefaultHiddenSizesFor(absl::string_view env,
                                                       ObservationMode mode) {
  ASSIGN_OR_RETURN(std::unique_ptr<Environment> made, MakeEnvironment(env, mode));
  return DefaultHiddenSizes(made->spec());
}

QNetworkOptions NetworkOptionsFor(const EnvironmentSpec& env, std::vector<int> hidden_sizes) {
  QNetworkOptions options;
  options.observation_size = env.observation_size;
  options.action_count = env.action_count;
  options.hidden_sizes = std::move(hidden_sizes);
  options.input_channels = env.observation_channels;
  switch (env.observation_layout) {
    case ObservationLayout::kVector:
      options.torso = QNetworkTorso::kMlp;
      break;
    case ObservationLayout::kGrid10x10:
      options.torso = QNetworkTorso::kMinAtar;
      break;
    case ObservationLayout::kPixels84:
      options.torso = QNetworkTorso::kNatureCnn;
      break;
  }
  return options;
}

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
  if (torso != QNetworkTorso::kMlp) {
    if (input_channels <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("QNetwork torso ", QNetworkTorsoName(torso),
                                                     " needs input_channels > 0, got ",
                                                     input_channels));
    }
    if (observation_size != TorsoInputSize(torso, input_channels)) {
      return absl::InvalidArgumentError(
          absl::StrCat("QNetwork torso ", QNetworkTorsoName(torso), " with ", input_channels,
                       " channels takes observations of ", TorsoInputSize(torso, input_channels),
                       " values, got observation_size ", observation_size));
    }
  }
  return absl::OkStatus();
}

void SetTorchThreads(int threads) {
  CHECK_GE(threads, 1);
  at::set_num_threads(threads);
}

QNetwork::Module::Module(const QNetworkOptions& options) : options_(options) {
  int64_t channels = options.input_channels;
  for (const ConvSpec& conv : TorsoConvs(options.torso)) {
    convs_.push_back(register_module(
        absl::StrCat("conv", convs_.size()),
        torch::nn::Conv2d(
            torch::nn::Conv2dOptions(channels, conv.out, conv.kernel).stride(conv.stride))));
    channels = conv.out;
  }
  const std::vector<int64_t> widths = HeadWidths(options);
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    layers_.push_back(
        register_module(absl::StrCat("fc", i),
                        torch::nn::Linear(torch::nn::LinearOptions(widths[i], widths[i + 1]))));
  }
}

torch::Tensor QNetwork::Module::Forward(const torch::Tensor& observations) {
  torch::Tensor x = observations;
  const int64_t batch = observations.size(0);
  const int64_t channels = options_.input_channels;
  if (options_.torso == QNetworkTorso::kMinAtar) {
    // (row, column, channel) -> (channel, row, column).
    x = x.reshape({batch, kGridSide, kGridSide, channels}).permute({0, 3, 1, 2});
  } else if (options_.torso == QNetworkTorso::kNatureCnn) {
    x = x.reshape({batch, channels, kFrameSide, kFrameSide}) * (1.0f / 255.0f);
  }
  for (torch::nn::Conv2d& conv : convs_) x = torch::relu(conv->forward(x));
  if (!convs_.empty()) x = x.flatten(1);
  for (size_t i = 0; i < layers_.size(); ++i) {
    x = layers_[i]->forward(x);
    if (i + 1 < layers_.size()) x = torch::relu(x);
  }
  return x;
}

absl::StatusOr<std::unique_ptr<QNetwork>> QNetwork::Create(const QNetworkOptions& options,
                                                           uint64_t seed) {
  RETURN_IF_ERROR(options.Validate());
  auto module = std::make_unique<Module>(options);
  // torch.nn.Linear's and Conv2d's default initialisation, from our own
  // generator: every weight and bias uniform in [-1/sqrt(fan_in),
  // 1/sqrt(fan_in)), fan_in the weight's values per output.
  Random random(seed);
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> params = module->parameters();
  CHECK_EQ(params.size() % 2, 0u);
  for (size_t layer = 0; 2 * layer < params.size(); ++layer) {
    const torch::Tensor& weight = params[2 * layer];
    const double fan_in = static_cast<double>(weight.numel() / weight.size(0));
    const double bound = 1.0 / std::sqrt(fan_in);
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
