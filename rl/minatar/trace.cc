// Copyright dreplay authors.

#include "rl/minatar/trace.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rl/minatar/environment.h"
#include "rl/minatar/numpy_random.h"

namespace dreplay::rl::minatar {

std::string Hex(absl::Span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xF];
  }
  return out;
}

absl::StatusOr<int> WriteTrace(const TraceOptions& options, absl::Span<const int> actions,
                               const std::function<void(absl::string_view)>& emit) {
  if (options.seed < 0 || static_cast<uint64_t>(options.seed) > LegacyRandomState::kMaxSeed) {
    return absl::InvalidArgumentError(
        absl::StrCat("seed must be in [0, 2**32 - 1], got ", options.seed));
  }
  for (size_t i = 0; i < actions.size(); ++i) {
    if (actions[i] < 0 || actions[i] >= kActionCount) {
      return absl::InvalidArgumentError(
          absl::StrCat("action ", i, " (", actions[i], ") is outside [0, ", kActionCount, ")"));
    }
  }
  Options env_options;
  env_options.sticky_action_prob = options.sticky_action_prob;
  env_options.difficulty_ramping = true;
  absl::StatusOr<std::unique_ptr<Environment>> created =
      Environment::Create(options.env, env_options);
  if (!created.ok()) return created.status();
  Environment* env = created->get();
  env->Seed(static_cast<uint32_t>(options.seed));
  env->Reset();
  std::vector<uint8_t> state(env->state_size());
  auto emit_reset = [&] {
    env->WriteState(absl::MakeSpan(state));
    emit(absl::StrCat("{\"reset\":true,\"obs_hex\":\"", Hex(state), "\"}"));
  };
  emit_reset();
  for (size_t i = 0; i < actions.size(); ++i) {
    const Outcome outcome = env->Act(actions[i]).value();  // actions checked above
    env->WriteState(absl::MakeSpan(state));
    emit(absl::StrFormat(
        "{\"t\":%d,\"action\":%d,\"reward\":%d,\"terminated\":%s,\"obs_hex\":\"%s\"}", i + 1,
        actions[i], outcome.reward, outcome.terminal ? "true" : "false", Hex(state)));
    if (outcome.terminal) {
      if (!options.continue_after_terminal) return static_cast<int>(i + 1);
      env->Reset();
      emit_reset();
    }
  }
  return static_cast<int>(actions.size());
}

}  // namespace dreplay::rl::minatar
