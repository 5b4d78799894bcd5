// Copyright dreplay authors.
//
// server_config.h: what the learner takes from the configuration the replay
// server publishes (protocol::LayoutConfig): the batch size and the replay
// capacity (the local memory's, in the learner placement), and what it
// checks there before training: the transition spec, the observation size,
// and that a transition of its environment fits a slot.
//
//   ExpectedTransitions expected;
//   expected.n_step = FLAGS_n_step;
//   expected.n_step_given = !FlagIsDefault("n_step");
//   ...
//   RETURN_IF_ERROR(ApplyServerConfig(session->config(), expected, &loop_options));
//
// Thread safety: a pure function.

#ifndef DREPLAY_LEARNER_CLIENT_SERVER_CONFIG_H_
#define DREPLAY_LEARNER_CLIENT_SERVER_CONFIG_H_

#include "absl/status/status.h"
#include "learner_client/learner_loop.h"
#include "protocol/layout.h"

namespace dreplay::learner {

// The learner's n and gamma. Those not given (on the command line) follow
// the server's transition spec; given ones must match it.
struct ExpectedTransitions {
  int n_step = 3;
  double gamma = 0.99;
  bool n_step_given = false;
  bool gamma_given = false;
};

// Sets options->memory.capacity and options->batch_size from `config`, and
// options->nstep (the probe set's) to the n and gamma the actors use,
// after checking its transition spec (a server that publishes none is not
// checked, with a warning) and observation size against options->env and
// `expected`, and that a transition fits the server's slots.
// FailedPrecondition saying what differs; InvalidArgument for an unknown
// environment or a spec that does not parse.
absl::Status ApplyServerConfig(const protocol::LayoutConfig& config,
                               const ExpectedTransitions& expected, LearnerLoopOptions* options);

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_SERVER_CONFIG_H_
