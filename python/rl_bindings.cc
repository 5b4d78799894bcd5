// Copyright dreplay authors.

#include "python/rl_bindings.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/types/span.h"
#include "protocol/transition_encoding.h"
#include "pybind11/numpy.h"
#include "pybind11/stl.h"
#include "python/status_error.h"
#include "rl/environment.h"
#include "rl/make_environment.h"
#include "rl/minatar_games.h"
#include "rl/params_format.h"

namespace dreplay::python {
namespace py = pybind11;
namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

FloatArray ToArray(const std::vector<float>& values) {
  FloatArray out(static_cast<py::ssize_t>(values.size()));
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

const char* LayoutName(rl::ObservationLayout layout) {
  switch (layout) {
    case rl::ObservationLayout::kVector:
      return "vector";
    case rl::ObservationLayout::kGrid10x10:
      return "grid10x10";
    case rl::ObservationLayout::kPixels84:
      return "pixels84";
  }
  return "unknown";
}

// The game's minimal action set for MinAtar; every action otherwise.
std::vector<int> MinimalActionSet(const rl::Environment& e) {
  if (const auto* minatar = dynamic_cast<const rl::MinAtar*>(&e)) {
    return minatar->minimal_action_set();
  }
  std::vector<int> all(e.spec().action_count);
  for (int a = 0; a < e.spec().action_count; ++a) all[a] = a;
  return all;
}

py::dict HeaderDict(const rl::ParamsHeader& h) {
  py::dict d;
  d["format_version"] = h.format_version;
  d["shape_hash"] = h.shape_hash;
  d["version"] = h.version;
  d["count"] = h.count;
  return d;
}

absl::Span<const uint8_t> BytesSpan(const py::bytes& data) {
  std::string_view view = data;
  return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(view.data()), view.size());
}

}  // namespace

void RegisterRl(py::module_& m) {
  py::class_<rl::Environment>(m, "Environment",
                              "A C++ environment (rl/environment.h); make_environment() makes one.")
      .def_property_readonly("name", [](const rl::Environment& e) { return e.spec().name; })
      .def_property_readonly("observation_size",
                             [](const rl::Environment& e) { return e.spec().observation_size; })
      .def_property_readonly("action_count",
                             [](const rl::Environment& e) { return e.spec().action_count; })
      .def_property_readonly("max_episode_steps",
                             [](const rl::Environment& e) { return e.spec().max_episode_steps; })
      .def_property_readonly(
          "observation_layout",
          [](const rl::Environment& e) { return LayoutName(e.spec().observation_layout); },
          "\"vector\", \"grid10x10\" (MinAtar native: 10x10xC, channel last) or "
          "\"pixels84\" (C stacked 84x84 frames).")
      .def_property_readonly(
          "observation_channels",
          [](const rl::Environment& e) { return e.spec().observation_channels; },
          "C of a grid or frame stack; 0 for a vector.")
      .def_property_readonly(
          "observation_type",
          [](const rl::Environment& e) {
            return protocol::ObservationTypeName(e.spec().observation_type);
          },
          "How transitions encode observations: \"f32\", or \"u8\" (MinAtar).")
      .def_property_readonly("minimal_action_set", &MinimalActionSet,
                             "MinAtar: the game's minimal action set; otherwise every action.")
      .def(
          "reset",
          [](rl::Environment& e, std::optional<uint64_t> seed) {
            return ToArray(seed ? e.Reset(*seed) : e.Reset());
          },
          py::arg("seed") = py::none(),
          "Starts an episode (seeding the generator when seed is given); the first observation.")
      .def(
          "step",
          [](rl::Environment& e, int action) {
            rl::StepResult r = ValueOrThrow(e.Step(action));
            return std::make_tuple(ToArray(r.observation), r.reward, r.terminated, r.truncated);
          },
          py::arg("action"), "(observation, reward, terminated, truncated), as Gymnasium's.")
      .def_property_readonly("elapsed_steps", &rl::Environment::elapsed_steps)
      .def_property_readonly("episode_active", &rl::Environment::episode_active);

  m.def(
      "make_environment",
      [](const std::string& name, const std::string& observation) {
        const rl::ObservationMode mode = ValueOrThrow(rl::ParseObservationMode(observation));
        return ValueOrThrow(rl::MakeEnvironment(name, mode));
      },
      py::arg("name"), py::arg("observation") = "native",
      "The environment `name` observing `observation` (native, or pixels84: MinAtar only).");
  m.def("environment_names", &rl::EnvironmentNames);

  m.def(
      "params_shape_hash",
      [](const std::vector<std::vector<int64_t>>& shapes) { return rl::ParamsShapeHash(shapes); },
      py::arg("shapes"), "The shape hash of a list of tensor shapes (rl/params_format.h).");
  m.def(
      "encode_params",
      [](uint64_t shape_hash, uint64_t version, FloatArray values) {
        std::string out(rl::ParamsBufferSize(values.size()), '\0');
        ValueOrThrow(
            rl::WriteParams(shape_hash, version, absl::MakeConstSpan(values.data(), values.size()),
                            absl::MakeSpan(reinterpret_cast<uint8_t*>(out.data()), out.size())));
        return py::bytes(out);
      },
      py::arg("shape_hash"), py::arg("version"), py::arg("values"),
      "A params buffer: the header, then the float32 values.");
  m.def(
      "decode_params_header",
      [](py::bytes data) {
        return HeaderDict(ValueOrThrow(rl::ReadParamsHeader(BytesSpan(data))));
      },
      py::arg("data"));
  m.def(
      "decode_params",
      [](py::bytes data, uint64_t expected_shape_hash) {
        absl::Span<const uint8_t> in = BytesSpan(data);
        rl::ParamsHeader header = ValueOrThrow(rl::ReadParamsHeader(in));
        FloatArray values(static_cast<py::ssize_t>(header.count));
        uint64_t version = ValueOrThrow(rl::ReadParams(
            in, expected_shape_hash, absl::MakeSpan(values.mutable_data(), values.size())));
        return std::make_tuple(version, values);
      },
      py::arg("data"), py::arg("expected_shape_hash"),
      "(version, float32 values) of a params buffer of that architecture.");
}

}  // namespace dreplay::python
