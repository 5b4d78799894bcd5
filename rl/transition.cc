// Copyright dreplay authors.

#include "rl/transition.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace dreplay::rl {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the transition encoding is little-endian and copied as is");
static_assert(sizeof(float) == 4, "observations are IEEE float32");

// The header as laid out in the encoding.
struct EncodedHeader {
  uint32_t observation_size;
  int32_t action;
  float reward;
  float discount;
  uint8_t done;
  uint8_t steps;
  uint16_t reserved;
};
static_assert(sizeof(EncodedHeader) == kTransitionHeaderBytes, "the header must have no padding");
static_assert(offsetof(EncodedHeader, reward) == 8);
static_assert(offsetof(EncodedHeader, discount) == 12);
static_assert(offsetof(EncodedHeader, done) == 16);
static_assert(offsetof(EncodedHeader, steps) == 17);
static_assert(offsetof(EncodedHeader, reserved) == 18);

// Reads and checks the header of `in` against `observation_size`.
absl::StatusOr<EncodedHeader> ReadHeader(absl::Span<const uint8_t> in, size_t observation_size) {
  const size_t expected = EncodedTransitionSize(observation_size);
  if (in.size() < kTransitionHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("encoded transition of ", in.size(),
                                                   " bytes is shorter than its ",
                                                   kTransitionHeaderBytes, "-byte header"));
  }
  EncodedHeader header;
  std::memcpy(&header, in.data(), sizeof(header));
  if (header.observation_size != observation_size) {
    return absl::InvalidArgumentError(absl::StrCat("encoded transition has observations of ",
                                                   header.observation_size, " floats, expected ",
                                                   observation_size));
  }
  if (in.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("encoded transition is ", in.size(), " bytes, expected ", expected,
                     " for observations of ", observation_size, " floats"));
  }
  if (header.done > 1 || header.steps == 0 || header.action < 0 ||
      !(header.discount >= 0.0f && header.discount <= 1.0f) || header.reserved != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("encoded transition has invalid fields: done=", int{header.done},
                     " steps=", int{header.steps}, " action=", header.action,
                     " discount=", header.discount, " reserved=", header.reserved));
  }
  return header;
}

// CheckTrainable() on a transition's fields; `observations` holds both.
absl::Status CheckTrainableFields(int64_t action, float reward, float discount,
                                  absl::Span<const float> observations, int action_count) {
  if (action < 0 || action >= action_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("action ", action, " is not in [0, ", action_count, ")"));
  }
  if (!std::isfinite(reward)) {
    return absl::InvalidArgumentError(absl::StrCat("reward ", reward, " is not finite"));
  }
  if (!(discount >= 0.0f && discount <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("discount ", discount, " is not in [0, 1]"));
  }
  for (size_t k = 0; k < observations.size(); ++k) {
    if (!std::isfinite(observations[k])) {
      return absl::InvalidArgumentError(
          absl::StrCat("observation float ", k, " is ", observations[k], ", not finite"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckTrainable(const Transition& transition, int action_count) {
  RETURN_IF_ERROR(CheckTrainableFields(transition.action, transition.reward, transition.discount,
                                       transition.observation, action_count));
  return CheckTrainableFields(transition.action, transition.reward, transition.discount,
                              transition.next_observation, action_count);
}

bool Transition::operator==(const Transition& other) const {
  return observation == other.observation && action == other.action && reward == other.reward &&
         discount == other.discount && done == other.done && steps == other.steps &&
         next_observation == other.next_observation;
}

absl::StatusOr<size_t> EncodeTransition(const Transition& transition, absl::Span<uint8_t> out) {
  const size_t m = transition.observation.size();
  if (transition.next_observation.size() != m) {
    return absl::InvalidArgumentError(absl::StrCat("transition observation has ", m,
                                                   " floats but next_observation has ",
                                                   transition.next_observation.size()));
  }
  if (transition.steps == 0 || transition.action < 0) {
    return absl::InvalidArgumentError(absl::StrCat("transition with steps=", int{transition.steps},
                                                   " action=", transition.action,
                                                   " cannot be encoded"));
  }
  const size_t size = EncodedTransitionSize(m);
  if (out.size() < size) {
    return absl::InvalidArgumentError(
        absl::StrCat("encoding a transition needs ", size, " bytes, buffer has ", out.size()));
  }
  EncodedHeader header;
  header.observation_size = static_cast<uint32_t>(m);
  header.action = transition.action;
  header.reward = transition.reward;
  header.discount = transition.discount;
  header.done = transition.done ? 1 : 0;
  header.steps = transition.steps;
  header.reserved = 0;
  uint8_t* p = out.data();
  std::memcpy(p, &header, sizeof(header));
  p += sizeof(header);
  std::memcpy(p, transition.observation.data(), m * sizeof(float));
  p += m * sizeof(float);
  std::memcpy(p, transition.next_observation.data(), m * sizeof(float));
  return size;
}

absl::StatusOr<absl::Span<const uint8_t>> EncodedTransitionPrefix(
    absl::Span<const uint8_t> payload) {
  if (payload.size() < kTransitionHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a payload of ", payload.size(),
                                                   " bytes is shorter than a transition header (",
                                                   kTransitionHeaderBytes, ")"));
  }
  uint32_t observation_size = 0;
  std::memcpy(&observation_size, payload.data(), sizeof(observation_size));
  const uint64_t size = kTransitionHeaderBytes + uint64_t{2} * sizeof(float) * observation_size;
  if (payload.size() < size) {
    return absl::InvalidArgumentError(
        absl::StrCat("a payload of ", payload.size(), " bytes is shorter than its encoding (", size,
                     " bytes for observations of ", observation_size, ")"));
  }
  return payload.first(static_cast<size_t>(size));
}

absl::Status DecodeTransition(absl::Span<const uint8_t> in, size_t observation_size,
                              Transition* out) {
  ASSIGN_OR_RETURN(const EncodedHeader header, ReadHeader(in, observation_size));
  out->action = header.action;
  out->reward = header.reward;
  out->discount = header.discount;
  out->done = header.done != 0;
  out->steps = header.steps;
  const uint8_t* p = in.data() + kTransitionHeaderBytes;
  out->observation.resize(observation_size);
  std::memcpy(out->observation.data(), p, observation_size * sizeof(float));
  p += observation_size * sizeof(float);
  out->next_observation.resize(observation_size);
  std::memcpy(out->next_observation.data(), p, observation_size * sizeof(float));
  return absl::OkStatus();
}

absl::StatusOr<Transition> DecodeTransition(absl::Span<const uint8_t> in, size_t observation_size) {
  Transition transition;
  RETURN_IF_ERROR(DecodeTransition(in, observation_size, &transition));
  return transition;
}

TransitionBatch::TransitionBatch(size_t observation_size) : observation_size_(observation_size) {
  CHECK_GT(observation_size, 0u);
}

void TransitionBatch::Clear() {
  observations_.clear();
  actions_.clear();
  rewards_.clear();
  discounts_.clear();
  dones_.clear();
  next_observations_.clear();
}

absl::Status TransitionBatch::Add(const Transition& transition) {
  if (transition.observation.size() != observation_size_ ||
      transition.next_observation.size() != observation_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch holds observations of ", observation_size_, " floats, transition has ",
                     transition.observation.size(), " and ", transition.next_observation.size()));
  }
  observations_.insert(observations_.end(), transition.observation.begin(),
                       transition.observation.end());
  actions_.push_back(transition.action);
  rewards_.push_back(transition.reward);
  discounts_.push_back(transition.discount);
  dones_.push_back(transition.done ? 1.0f : 0.0f);
  next_observations_.insert(next_observations_.end(), transition.next_observation.begin(),
                            transition.next_observation.end());
  return absl::OkStatus();
}

absl::Status TransitionBatch::CheckRow(size_t i, int action_count) const {
  CHECK_LT(i, size());
  const size_t m = observation_size_;
  RETURN_IF_ERROR(CheckTrainableFields(actions_[i], rewards_[i], discounts_[i],
                                       absl::MakeConstSpan(&observations_[i * m], m),
                                       action_count));
  return CheckTrainableFields(actions_[i], rewards_[i], discounts_[i],
                              absl::MakeConstSpan(&next_observations_[i * m], m), action_count);
}

void TransitionBatch::KeepRows(absl::Span<const uint32_t> rows) {
  const size_t m = observation_size_;
  size_t out = 0;
  for (const uint32_t row : rows) {
    CHECK_LT(row, size());
    CHECK_GE(row, out);  // ascending: rows never move up
    if (row != out) {
      std::copy_n(&observations_[row * m], m, &observations_[out * m]);
      std::copy_n(&next_observations_[row * m], m, &next_observations_[out * m]);
      actions_[out] = actions_[row];
      rewards_[out] = rewards_[row];
      discounts_[out] = discounts_[row];
      dones_[out] = dones_[row];
    }
    ++out;
  }
  observations_.resize(out * m);
  next_observations_.resize(out * m);
  actions_.resize(out);
  rewards_.resize(out);
  discounts_.resize(out);
  dones_.resize(out);
}

absl::Status TransitionBatch::AddEncoded(absl::Span<const uint8_t> encoded) {
  RETURN_IF_ERROR(DecodeTransition(encoded, observation_size_, &scratch_));
  return Add(scratch_);
}

}  // namespace dreplay::rl
