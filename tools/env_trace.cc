// Copyright dreplay authors.
//
// env_trace: steps one of dreplay's environments through a given sequence of
// actions and prints the trajectory as JSON lines, to compare it with the
// Gymnasium reference.
//
//   bazel run //tools:env_trace -- --env=CartPole-v1
//       --initial_state=0.01,-0.02,0.03,-0.04 --actions=1,0,0,1
//   (one command line)
//   bazel run //tools:env_trace -- --env=Acrobot-v1 --seed=7 --actions=2,2,0
//
// The episode starts either from --initial_state (the full-precision state,
// as in `env.unwrapped.state = ...`) or from a reset with --seed (dreplay's
// generator: the same distribution as the reference, not NumPy's numbers).
// Output, one JSON object per line:
//   - t = 0: the initial state, with "action" and "reward" null;
//   - t = 1, 2, ...: the state after the t-th action.
// Each has "t", "action", "state" (float64, %.17g: exact), "obs" (float32,
// %.9g: exact), "reward", "terminated" and "truncated". The trace stops at
// the end of the episode (terminated or truncated); actions left over are
// reported on stderr.
//
// MinAtar games follow the reference's trace contract instead (see
// rl/minatar/trace.h): NumPy's seeding, exactly, and the state as hex.
//
//   bazel run //tools:env_trace -- --env=MinAtar/Breakout --seed=3
//       --sticky_action_prob=0.1 --actions=1,0,3 --continue_after_terminal
//
// is Environment('breakout', sticky_action_prob=0.1,
// difficulty_ramping=True), seed(3), reset(), then act(a) per action, and
// reset() after each terminal frame with --continue_after_terminal (else
// the trace stops there). Lines: {"reset":true,"obs_hex":...} first and
// after each reset, and {"t","action","reward","terminated","obs_hex"} per
// action, "obs_hex" being the 10x10xC uint8 state in C order.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "rl/environment.h"
#include "rl/make_environment.h"
#include "rl/minatar/trace.h"

DEFINE_string(env, "CartPole-v1",
              "Environment name, e.g. CartPole-v1, "
              "Acrobot-v1, MountainCar-v0, MinAtar/Breakout.");
DEFINE_string(initial_state, "",
              "Comma-separated full state to start from (CartPole: x, x_dot, "
              "theta, theta_dot; Acrobot: theta1, theta2, dtheta1, dtheta2; "
              "MountainCar: position, velocity). Exclusive with --seed.");
DEFINE_int64(seed, -1,
             "Start from a reset with this seed (>= 0) instead of "
             "--initial_state.");
DEFINE_string(actions, "", "Comma-separated actions to take, e.g. 1,0,0,1.");
DEFINE_double(sticky_action_prob, 0.1,
              "MinAtar only: the probability that an action repeats the previous one.");
DEFINE_bool(continue_after_terminal, false,
            "MinAtar only: reset after a terminal frame and go on with the actions.");

namespace dreplay {
namespace {

// Splits a comma-separated flag value; an empty value gives no items.
std::vector<std::string> SplitList(const std::string& value) {
  if (value.empty()) return {};
  return absl::StrSplit(value, ',');
}

absl::StatusOr<std::vector<double>> ParseState(const std::string& value,
                                               const rl::EnvironmentSpec& spec) {
  std::vector<double> state;
  for (const std::string& item : SplitList(value)) {
    double x;
    if (!absl::SimpleAtod(item, &x)) {
      return absl::InvalidArgumentError(absl::StrCat("--initial_state: value ", state.size(),
                                                     " (\"", item, "\") is not a number"));
    }
    state.push_back(x);
  }
  if (static_cast<int>(state.size()) != spec.state_size) {
    return absl::InvalidArgumentError(absl::StrCat("--initial_state: ", spec.name,
                                                   " has a state of ", spec.state_size,
                                                   " values, got ", state.size()));
  }
  return state;
}

absl::StatusOr<std::vector<int>> ParseActions(const std::string& value,
                                              const rl::EnvironmentSpec& spec) {
  std::vector<int> actions;
  for (const std::string& item : SplitList(value)) {
    int a;
    if (!absl::SimpleAtoi(item, &a) || a < 0 || a >= spec.action_count) {
      return absl::InvalidArgumentError(
          absl::StrCat("--actions: item ", actions.size(), " (\"", item, "\") is not a valid ",
                       spec.name, " action: an integer in [0, ", spec.action_count, ")"));
    }
    actions.push_back(a);
  }
  return actions;
}

std::string JsonDoubles(absl::Span<const double> values) {
  return absl::StrCat(
      "[",
      absl::StrJoin(values, ",",
                    [](std::string* out, double v) { absl::StrAppendFormat(out, "%.17g", v); }),
      "]");
}

std::string JsonFloats(absl::Span<const float> values) {
  return absl::StrCat(
      "[",
      absl::StrJoin(values, ",",
                    [](std::string* out, float v) { absl::StrAppendFormat(out, "%.9g", v); }),
      "]");
}

const char* JsonBool(bool b) { return b ? "true" : "false"; }

// The MinAtar trace contract (rl/minatar/trace.h).
absl::Status RunMinAtar() {
  if (!FLAGS_initial_state.empty()) {
    return absl::InvalidArgumentError("--initial_state: MinAtar games start from --seed");
  }
  std::vector<int> actions;
  for (const std::string& item : SplitList(FLAGS_actions)) {
    int a;
    if (!absl::SimpleAtoi(item, &a)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--actions: item ", actions.size(), " (\"", item, "\") is not an integer"));
    }
    actions.push_back(a);
  }
  rl::minatar::TraceOptions options;
  options.env = FLAGS_env;
  options.seed = FLAGS_seed;
  options.sticky_action_prob = FLAGS_sticky_action_prob;
  options.continue_after_terminal = FLAGS_continue_after_terminal;
  ASSIGN_OR_RETURN(const int taken,
                   rl::minatar::WriteTrace(options, actions, [](absl::string_view line) {
                     absl::PrintF("%s\n", line);
                   }));
  if (taken < static_cast<int>(actions.size())) {
    absl::FPrintF(stderr, "env_trace: the episode ended at step %d; %d actions not taken\n", taken,
                  actions.size() - taken);
  }
  return absl::OkStatus();
}

absl::Status Run() {
  if (absl::StartsWith(FLAGS_env, "MinAtar/")) return RunMinAtar();
  ASSIGN_OR_RETURN(std::unique_ptr<rl::Environment> env, rl::MakeEnvironment(FLAGS_env));
  const rl::EnvironmentSpec& spec = env->spec();
  const bool has_state = !FLAGS_initial_state.empty();
  const bool has_seed = FLAGS_seed >= 0;
  if (has_state == has_seed) {
    return absl::InvalidArgumentError("give exactly one of --initial_state and --seed (>= 0)");
  }
  ASSIGN_OR_RETURN(const std::vector<int> actions, ParseActions(FLAGS_actions, spec));
  if (has_state) {
    ASSIGN_OR_RETURN(const std::vector<double> state, ParseState(FLAGS_initial_state, spec));
    RETURN_IF_ERROR(env->SetState(state));
  } else {
    env->Reset(static_cast<uint64_t>(FLAGS_seed));
  }
  absl::PrintF(
      "{\"t\":0,\"action\":null,\"state\":%s,\"obs\":%s,\"reward\":null,"
      "\"terminated\":false,\"truncated\":false}\n",
      JsonDoubles(env->state()), JsonFloats(env->Observation()));
  for (size_t t = 0; t < actions.size(); ++t) {
    ASSIGN_OR_RETURN(const rl::StepResult step, env->Step(actions[t]));
    absl::PrintF(
        "{\"t\":%d,\"action\":%d,\"state\":%s,\"obs\":%s,\"reward\":%.17g,"
        "\"terminated\":%s,\"truncated\":%s}\n",
        t + 1, actions[t], JsonDoubles(env->state()), JsonFloats(step.observation), step.reward,
        JsonBool(step.terminated), JsonBool(step.truncated));
    if (step.done() && t + 1 < actions.size()) {
      absl::FPrintF(stderr,
                    "env_trace: the episode ended at step %d; %d actions "
                    "not taken\n",
                    t + 1, actions.size() - t - 1);
      break;
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace dreplay

int main(int argc, char** argv) {
  gflags::SetUsageMessage("Prints an environment trajectory as JSON lines; see env_trace.cc.");
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  if (argc > 1) {
    absl::FPrintF(stderr, "env_trace: unexpected argument \"%s\"\n", argv[1]);
    return 1;
  }
  const absl::Status status = dreplay::Run();
  if (!status.ok()) {
    absl::FPrintF(stderr, "env_trace: %s\n", status.message());
    return 1;
  }
  return 0;
}
