// Copyright dreplay authors.

#include "learner_client/server_config.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "protocol/transition_spec.h"
#include "rl/make_environment.h"
#include "rl/transition.h"

namespace dreplay::learner {

absl::Status ApplyServerConfig(const protocol::LayoutConfig& config,
                               const ExpectedTransitions& expected, LearnerLoopOptions* options) {
  ASSIGN_OR_RETURN(std::unique_ptr<rl::Environment> env,
                   rl::MakeEnvironment(options->env, options->observation));
  const rl::EnvironmentSpec& spec = env->spec();
  protocol::TransitionSpec ours{spec.name,       spec.observation_size, spec.action_count,
                                expected.n_step, expected.gamma,        spec.observation_type};
  const std::string text = config.spec();
  if (text.empty()) {
    LOG(WARNING) << "the server publishes no transition spec; assuming " << ours.ToString();
  } else {
    ASSIGN_OR_RETURN(const protocol::TransitionSpec published,
                     protocol::TransitionSpec::Parse(text));
    if (!expected.n_step_given) ours.n_step = published.n_step;
    if (!expected.gamma_given) ours.gamma = published.gamma;
    RETURN_IF_ERROR(ours.CheckMatches(published));
    LOG(INFO) << "transitions: " << published.ToString();
  }
  if (config.observation_size != 0 &&
      config.observation_size != static_cast<uint32_t>(spec.observation_size)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the server expects observations of ", config.observation_size, " values; ",
                     options->env, " has ", spec.observation_size));
  }
  // With frames stored once a slot holds one frame record, whose size the
  // server checks at ingest; the stacks are assembled at this end.
  const size_t encoded = rl::EncodedTransitionSize(spec.observation_size, spec.observation_type);
  if (config.frame_stack == 0 && encoded > config.max_payload()) {
    return absl::FailedPreconditionError(absl::StrCat("a ", options->env, " transition takes ",
                                                      encoded, " bytes; the server's slots hold ",
                                                      config.max_payload()));
  }
  options->nstep.n = ours.n_step;
  options->nstep.discount = ours.gamma;
  options->memory.capacity = config.capacity;
  options->frame_stack = static_cast<int>(config.frame_stack);
  options->batch_size = config.batch_size;
  return absl::OkStatus();
}

}  // namespace dreplay::learner
