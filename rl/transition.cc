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

using protocol::EncodedTransitionHeader;

// Reads and checks the header of `in` against `observation_size` and `type`.
absl::StatusOr<EncodedTransitionHeader> ReadHeader(absl::Span<const uint8_t> in,
                                                   size_t observation_size, ObservationType type) {
  const size_t expected = EncodedTransitionSize(observation_size, type);
  if (in.size() < kTransitionHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("encoded transition of ", in.size(),
                                                   " bytes is shorter than its ",
                                                   kTransitionHeaderBytes, "-byte header"));
  }
  EncodedTransitionHeader header;
  std::memcpy(&header, in.data(), sizeof(header));
  if (header.observation_size != observation_size) {
    return absl::InvalidArgumentError(absl::StrCat("encoded transition has observations of ",
                                                   header.observation_size, " values, expected ",
                                                   observation_size));
  }
  if (header.observation_type != static_cast<uint8_t>(type)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "encoded transition has observation_type ", int{header.observation_type}, ", expected ",
        int{static_cast<uint8_t>(type)}, " (", protocol::ObservationTypeName(type), ")"));
  }
  if (in.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "encoded transition is ", in.size(), " bytes, expected ", expected, " for observations of ",
        observation_size, " ", protocol::ObservationTypeName(type), " values"));
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

// OK when every value of `values` is a whole number in [0, 255] (encodable
// as u8 exactly); InvalidArgument naming the first that is not.
absl::Status CheckBytes(absl::Span<const float> values, const char* field) {
  for (size_t k = 0; k < values.size(); ++k) {
    const float v = values[k];
    if (!(v >= 0.0f && v <= 255.0f) || v != std::floor(v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " value ", k, " is ", v, ": a u8 observation holds whole numbers in [0, 255]"));
    }
  }
  return absl::OkStatus();
}

// Writes `values` as `type` at `p`; returns the end of what it wrote.
// REQUIRES (u8): CheckBytes(values) passed.
uint8_t* WriteValues(absl::Span<const float> values, ObservationType type, uint8_t* p) {
  if (type == ObservationType::kFloat32) {
    std::memcpy(p, values.data(), values.size() * sizeof(float));
    return p + values.size() * sizeof(float);
  }
  for (const float v : values) *p++ = static_cast<uint8_t>(v);
  return p;
}

// Reads `count` values of `type` at `p` into `out`; returns the end of what
// it read.
const uint8_t* ReadValues(const uint8_t* p, ObservationType type, size_t count,
                          std::vector<float>* out) {
  out->resize(count);
  if (type == ObservationType::kFloat32) {
    std::memcpy(out->data(), p, count * sizeof(float));
    return p + count * sizeof(float);
  }
  for (size_t k = 0; k < count; ++k) (*out)[k] = static_cast<float>(p[k]);
  return p + count;
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

absl::StatusOr<size_t> EncodeTransition(const Transition& transition, absl::Span<uint8_t> out,
                                        ObservationType type) {
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
  const size_t size = EncodedTransitionSize(m, type);
  if (out.size() < size) {
    return absl::InvalidArgumentError(
        absl::StrCat("encoding a transition needs ", size, " bytes, buffer has ", out.size()));
  }
  if (type == ObservationType::kUint8) {
    RETURN_IF_ERROR(CheckBytes(transition.observation, "observation"));
    RETURN_IF_ERROR(CheckBytes(transition.next_observation, "next_observation"));
  }
  EncodedTransitionHeader header;
  header.observation_size = static_cast<uint32_t>(m);
  header.action = transition.action;
  header.reward = transition.reward;
  header.discount = transition.discount;
  header.done = transition.done ? 1 : 0;
  header.steps = transition.steps;
  header.observation_type = static_cast<uint8_t>(type);
  header.reserved = 0;
  uint8_t* p = out.data();
  std::memcpy(p, &header, sizeof(header));
  p += sizeof(header);
  p = WriteValues(transition.observation, type, p);
  WriteValues(transition.next_observation, type, p);
  return size;
}

absl::StatusOr<absl::Span<const uint8_t>> EncodedTransitionPrefix(
    absl::Span<const uint8_t> payload) {
  if (payload.size() < kTransitionHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a payload of ", payload.size(),
                                                   " bytes is shorter than a transition header (",
                                                   kTransitionHeaderBytes, ")"));
  }
  EncodedTransitionHeader header;
  std::memcpy(&header, payload.data(), sizeof(header));
  if (!protocol::IsObservationType(header.observation_type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a payload has unknown observation_type ", int{header.observation_type}));
  }
  const uint64_t size = protocol::EncodedTransitionBytes(
      header.observation_size, static_cast<ObservationType>(header.observation_type));
  if (payload.size() < size) {
    return absl::InvalidArgumentError(
        absl::StrCat("a payload of ", payload.size(), " bytes is shorter than its encoding (", size,
                     " bytes for observations of ", header.observation_size, ")"));
  }
  return payload.first(static_cast<size_t>(size));
}

absl::Status DecodeTransition(absl::Span<const uint8_t> in, size_t observation_size,
                              Transition* out, ObservationType type) {
  ASSIGN_OR_RETURN(const EncodedTransitionHeader header, ReadHeader(in, observation_size, type));
  out->action = header.action;
  out->reward = header.reward;
  out->discount = header.discount;
  out->done = header.done != 0;
  out->steps = header.steps;
  const uint8_t* p = in.data() + kTransitionHeaderBytes;
  p = ReadValues(p, type, observation_size, &out->observation);
  ReadValues(p, type, observation_size, &out->next_observation);
  return absl::OkStatus();
}

absl::StatusOr<Transition> DecodeTransition(absl::Span<const uint8_t> in, size_t observation_size,
                                            ObservationType type) {
  Transition transition;
  RETURN_IF_ERROR(DecodeTransition(in, observation_size, &transition, type));
  return transition;
}

TransitionBatch::TransitionBatch(size_t observation_size, ObservationType type)
    : observation_size_(observation_size), observation_type_(type) {
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

void TransitionBatch::AppendRow(const TransitionBatch& from, size_t row) {
  CHECK_LT(row, from.size());
  CHECK_EQ(from.observation_size_, observation_size_);
  const size_t m = observation_size_;
  observations_.insert(observations_.end(), from.observations_.begin() + row * m,
                       from.observations_.begin() + (row + 1) * m);
  next_observations_.insert(next_observations_.end(), from.next_observations_.begin() + row * m,
                            from.next_observations_.begin() + (row + 1) * m);
  actions_.push_back(from.actions_[row]);
  rewards_.push_back(from.rewards_[row]);
  discounts_.push_back(from.discounts_[row]);
  dones_.push_back(from.dones_[row]);
}

absl::Status TransitionBatch::AddBytes(int32_t action, float reward, float discount, bool done,
                                       absl::Span<const uint8_t> observation,
                                       absl::Span<const uint8_t> next_observation) {
  if (observation.size() != observation_size_ || next_observation.size() != observation_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch holds observations of ", observation_size_, " values, transition has ",
                     observation.size(), " and ", next_observation.size()));
  }
  observations_.insert(observations_.end(), observation.begin(), observation.end());
  actions_.push_back(action);
  rewards_.push_back(reward);
  discounts_.push_back(discount);
  dones_.push_back(done ? 1.0f : 0.0f);
  next_observations_.insert(next_observations_.end(), next_observation.begin(),
                            next_observation.end());
  return absl::OkStatus();
}

absl::Status TransitionBatch::AddEncoded(absl::Span<const uint8_t> encoded) {
  RETURN_IF_ERROR(DecodeTransition(encoded, observation_size_, &scratch_, observation_type_));
  return Add(scratch_);
}

}  // namespace dreplay::rl
