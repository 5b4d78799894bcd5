// Copyright dreplay authors.
//
// trace.h: the MinAtar trace contract of `env_trace --env=MinAtar/...`, the
// form in which our port and the reference are compared line for line
// (rl/minatar/testdata/reference_trace.py writes the reference's).
//
// The sequence: Environment(game, sticky_action_prob=P,
// difficulty_ramping=True), seed(S), reset(); then act(a) for each action,
// and, with continue_after_terminal, reset() after each terminal frame
// (without it the trace stops at the first terminal frame).
//
// Lines (JSON, no spaces, in this key order):
//   {"reset":true,"obs_hex":"..."}          first, and after each reset
//   {"t":1,"action":3,"reward":0,"terminated":false,"obs_hex":"..."}
// "t" counts the actions from 1 over the whole trace; "action" is the one
// asked for (before any sticky repeat); "obs_hex" is the state as 10x10xC
// uint8 in C order, two lowercase hex digits a byte. Freeway's time limit is
// a terminated frame like any other.

#ifndef DREPLAY_RL_MINATAR_TRACE_H_
#define DREPLAY_RL_MINATAR_TRACE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace dreplay::rl::minatar {

struct TraceOptions {
  std::string env;   // e.g. "MinAtar/Breakout"
  int64_t seed = 0;  // in [0, 2**32), as legacy NumPy requires
  double sticky_action_prob = 0.1;
  bool continue_after_terminal = false;
};

// Runs the sequence above and passes each line (without its newline) to
// `emit`. Returns how many actions were taken: all of them unless the trace
// stopped at a terminal frame. INVALID_ARGUMENT for a bad seed, probability
// or action (nothing is emitted for a bad action: all are checked first);
// NOT_FOUND for an unknown game.
absl::StatusOr<int> WriteTrace(const TraceOptions& options, absl::Span<const int> actions,
                               const std::function<void(absl::string_view)>& emit);

// Lowercase hex of `bytes`, two digits a byte.
std::string Hex(absl::Span<const uint8_t> bytes);

}  // namespace dreplay::rl::minatar

#endif  // DREPLAY_RL_MINATAR_TRACE_H_
