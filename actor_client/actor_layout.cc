// Copyright dreplay authors.

#include "actor_client/actor_layout.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/json_writer.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "protocol/frame_record.h"
#include "rl/make_environment.h"
#include "rl/qnet.h"
#include "rl/transition.h"

namespace dreplay::actor {

absl::StatusOr<ActorLayout> ActorLayout::Compute(const std::string& env,
                                                 rl::ObservationMode observation, int n_step,
                                                 double gamma, const std::vector<int>& hidden_sizes,
                                                 size_t payload_pad_bytes, int frame_stack) {
  ASSIGN_OR_RETURN(std::unique_ptr<rl::Environment> environment,
                   rl::MakeEnvironment(env, observation));
  const rl::EnvironmentSpec& e = environment->spec();
  ActorLayout layout;
  layout.spec = {e.name, e.observation_size, e.action_count, n_step, gamma, e.observation_type};
  layout.observation = observation;
  layout.payload_pad_bytes = payload_pad_bytes;
  layout.frame_stack = frame_stack;
  if (frame_stack > 0) {
    if (e.observation_layout != rl::ObservationLayout::kPixels84 ||
        e.observation_type != protocol::ObservationType::kUint8 ||
        e.observation_channels != frame_stack) {
      return absl::InvalidArgumentError(absl::StrCat("frame_stack=", frame_stack, ": ", e.name,
                                                     " does not observe stacks of ", frame_stack,
                                                     " u8 frames (use --observation=pixels84)"));
    }
    layout.payload_bytes =
        protocol::FrameRecordBytes(frame_stack, e.observation_size / frame_stack) +
        payload_pad_bytes;
  } else {
    layout.payload_bytes =
        rl::EncodedTransitionSize(e.observation_size, e.observation_type) + payload_pad_bytes;
  }
  layout.slot_size = protocol::SlotSizeFor(layout.payload_bytes);
  ASSIGN_OR_RETURN(std::unique_ptr<rl::QNetwork> q,
                   rl::QNetwork::Create(rl::NetworkOptionsFor(e, hidden_sizes), /*seed=*/0));
  layout.params_bytes = q->SerializedSize();
  return layout;
}

std::string ActorLayout::ToJson() const {
  return absl::StrCat("{\"env\":", JsonString(spec.env),
                      ",\"observation\":", JsonString(rl::ObservationModeName(observation)),
                      ",\"transition_spec\":", JsonString(spec.ToString()),
                      ",\"observation_size\":", spec.observation_size,
                      ",\"num_actions\":", spec.action_count, ",\"payload_bytes\":", payload_bytes,
                      ",\"slot_size\":", slot_size, ",\"params_bytes\":", params_bytes,
                      ",\"payload_pad_bytes\":", payload_pad_bytes,
                      ",\"frame_stack\":", frame_stack, "}");
}

absl::Status CheckServerConfig(const protocol::LayoutConfig& config, const ActorLayout& layout,
                               int actor_index) {
  const protocol::TransitionSpec& ours = layout.spec;
  const std::string published_text = config.spec();
  if (published_text.empty()) {
    LOG(WARNING) << "the server publishes no transition spec; not checking that it expects "
                 << ours.ToString();
  } else {
    ASSIGN_OR_RETURN(const protocol::TransitionSpec published,
                     protocol::TransitionSpec::Parse(published_text));
    RETURN_IF_ERROR(ours.CheckMatches(published));
  }
  if (config.observation_size != 0 &&
      config.observation_size != static_cast<uint32_t>(ours.observation_size)) {
    return absl::FailedPreconditionError(absl::StrCat("the server expects observations of ",
                                                      config.observation_size, " values; ",
                                                      ours.env, " has ", ours.observation_size));
  }
  if (config.num_actions != 0 && config.num_actions != static_cast<uint32_t>(ours.action_count)) {
    return absl::FailedPreconditionError(absl::StrCat("the server expects ", config.num_actions,
                                                      " actions; ", ours.env, " has ",
                                                      ours.action_count));
  }
  if (config.frame_stack != static_cast<uint32_t>(layout.frame_stack)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the server's --frame_stack=", config.frame_stack, " but this actor's is ",
                     layout.frame_stack, ": both store frames once, or neither"));
  }
  if (layout.payload_bytes > config.max_payload()) {
    return absl::FailedPreconditionError(
        absl::StrCat("a ", ours.env, " transition takes ", layout.payload_bytes,
                     " bytes; the server's slots hold ", config.max_payload(),
                     " (start it with --slot_size >= ", layout.slot_size, ")"));
  }
  if (config.max_actors != 0 && static_cast<uint32_t>(actor_index) >= config.max_actors) {
    return absl::FailedPreconditionError(absl::StrCat("--actor_index=", actor_index,
                                                      " but the server accepts actor ids below ",
                                                      config.max_actors));
  }
  return absl::OkStatus();
}

}  // namespace dreplay::actor
