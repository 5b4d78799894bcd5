// Copyright dreplay authors.

#include "protocol/transition_spec.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dreplay::protocol {
namespace {

// The keys, in the order they are written.
constexpr const char* kKeys[] = {"env", "obs", "act", "nstep", "gamma"};
constexpr int kNumKeys = sizeof(kKeys) / sizeof(kKeys[0]);

// Parses obs's value: a count, then optionally "u8" or "f32".
bool ParseObservation(absl::string_view value, TransitionSpec* spec) {
  const size_t digits = value.find_first_not_of("0123456789");
  const absl::string_view count = value.substr(0, digits);
  const absl::string_view type =
      digits == absl::string_view::npos ? absl::string_view("f32") : value.substr(digits);
  const std::optional<ObservationType> parsed = ParseObservationType(type);
  if (!parsed.has_value()) return false;
  spec->observation_type = *parsed;
  return absl::SimpleAtoi(count, &spec->observation_size) && spec->observation_size > 0;
}
constexpr double kGammaTolerance = 1e-9;

// The shortest %g form of `value` that reads back as the same double.
std::string ShortestDouble(double value) {
  char buffer[64];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
    double back = 0;
    if (absl::SimpleAtod(buffer, &back) && back == value) break;
  }
  return buffer;
}

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("transition spec \"", text, "\": ", why,
                   " (expected \"env=NAME obs=N[u8] act=N nstep=N gamma=X\")"));
}

}  // namespace

absl::StatusOr<TransitionSpec> TransitionSpec::Parse(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ' ', absl::SkipEmpty());
  if (parts.size() != kNumKeys) {
    return Bad(text, absl::StrCat("has ", parts.size(), " fields, not ", kNumKeys));
  }
  TransitionSpec spec;
  for (int i = 0; i < kNumKeys; ++i) {
    const std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(parts[i], absl::MaxSplits('=', 1));
    if (kv.first != kKeys[i]) {
      return Bad(text, absl::StrCat("field ", i + 1, " is \"", parts[i], "\", expected ", kKeys[i],
                                    "=..."));
    }
    const absl::string_view value = kv.second;
    bool ok = true;
    switch (i) {
      case 0:
        spec.env = std::string(value);
        ok = !value.empty();
        break;
      case 1:
        ok = ParseObservation(value, &spec);
        break;
      case 2:
        ok = absl::SimpleAtoi(value, &spec.action_count) && spec.action_count > 0;
        break;
      case 3:
        ok = absl::SimpleAtoi(value, &spec.n_step) && spec.n_step > 0;
        break;
      case 4:
        ok = absl::SimpleAtod(value, &spec.gamma) && spec.gamma >= 0 && spec.gamma <= 1;
        break;
    }
    if (!ok) return Bad(text, absl::StrCat("bad value in \"", parts[i], "\""));
  }
  return spec;
}

std::string TransitionSpec::ToString() const {
  const char* type =
      observation_type == ObservationType::kFloat32 ? "" : ObservationTypeName(observation_type);
  return absl::StrCat("env=", env, " obs=", observation_size, type, " act=", action_count,
                      " nstep=", n_step, " gamma=", ShortestDouble(gamma));
}

absl::Status TransitionSpec::CheckMatches(const TransitionSpec& published) const {
  auto differs = [](absl::string_view field, const auto& ours, const auto& theirs) {
    return absl::FailedPreconditionError(absl::StrCat("the server's transition spec has ", field,
                                                      "=", theirs, " but this client has ", field,
                                                      "=", ours));
  };
  if (env != published.env) return differs("env", env, published.env);
  if (observation_size != published.observation_size) {
    return differs("obs", observation_size, published.observation_size);
  }
  if (observation_type != published.observation_type) {
    return differs("obs type", ObservationTypeName(observation_type),
                   ObservationTypeName(published.observation_type));
  }
  if (action_count != published.action_count) {
    return differs("act", action_count, published.action_count);
  }
  if (n_step != published.n_step) return differs("nstep", n_step, published.n_step);
  if (std::fabs(gamma - published.gamma) > kGammaTolerance * std::fabs(published.gamma)) {
    return differs("gamma", ShortestDouble(gamma), ShortestDouble(published.gamma));
  }
  return absl::OkStatus();
}

}  // namespace dreplay::protocol
