// Copyright dreplay authors.
//
// frame_stream_testing.h: a synthetic actor stream for the frames tests:
// frame records (rl::FrameRecorder) of several environments with episodes
// of random lengths, in sequence order, and the transition each record
// that carries one stands for, as the actor built it from its own stacks
// (an n-step accumulator over the stacked observations).

#ifndef DREPLAY_LEARNER_CLIENT_FRAME_STREAM_TESTING_H_
#define DREPLAY_LEARNER_CLIENT_FRAME_STREAM_TESTING_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "glog/logging.h"
#include "protocol/frame_record.h"
#include "rl/frame_recorder.h"
#include "rl/nstep.h"
#include "rl/transition.h"

namespace dreplay::learner::frame_stream_testing {

constexpr int kDepth = 4;
constexpr size_t kFrameBytes = 24;
constexpr size_t kStackBytes = kDepth * kFrameBytes;
constexpr int kEnvironments = 3;
constexpr int kActions = 4;
constexpr int kRecords = 4000;  // about 16 laps of the 256-slot lease

// The stream an actor writes: records in sequence order, and the
// transition each record that carries one stands for, as the actor built
// it from its own stacks.
struct Stream {
  std::vector<std::vector<uint8_t>> records;
  std::map<uint64_t, rl::Transition> transitions;  // by record sequence
};

inline Stream MakeStream(uint32_t seed, size_t record_count = kRecords) {
  std::mt19937 random(seed);
  const rl::NStepOptions nstep{/*n=*/3, /*discount=*/0.9};
  rl::FrameRecorder recorder({nstep, kDepth, kFrameBytes, kEnvironments});
  struct Env {
    std::deque<std::vector<uint8_t>> stack;
    std::unique_ptr<rl::NStepAccumulator> nstep;
    int steps_left = 0;
  };
  std::vector<Env> envs(kEnvironments);
  Stream stream;
  std::vector<rl::FrameRecorder::Record> records;
  std::vector<rl::Transition> completed;
  auto frame = [&] {
    std::vector<uint8_t> f(kFrameBytes);
    for (uint8_t& b : f) b = static_cast<uint8_t>(random());
    return f;
  };
  auto stacked = [](const Env& env) {
    std::vector<float> out;
    for (const auto& f : env.stack) out.insert(out.end(), f.begin(), f.end());
    return out;
  };
  // Appends `records`, pairing those with a transition with `completed`.
  auto append = [&] {
    size_t t = 0;
    for (rl::FrameRecorder::Record& r : records) {
      protocol::FrameRecordView view;
      CHECK(protocol::DecodeFrameRecord(r.bytes, kFrameBytes, &view).ok());
      const uint64_t q = stream.records.size();
      CHECK_EQ(r.sequence, q);
      if (view.has_transition()) stream.transitions[q] = completed.at(t++);
      stream.records.push_back(std::move(r.bytes));
    }
    CHECK_EQ(t, completed.size());
    records.clear();
    completed.clear();
  };
  auto begin = [&](int e) {
    Env& env = envs[e];
    const std::vector<uint8_t> first = frame();
    env.stack.assign(kDepth, first);
    env.nstep = std::make_unique<rl::NStepAccumulator>(nstep, kStackBytes);
    CHECK(env.nstep->BeginEpisode(stacked(env)).ok());
    env.steps_left = 1 + static_cast<int>(random() % 12);
    CHECK(recorder.BeginEpisode(e, first, &records).ok());
    append();
  };
  for (int e = 0; e < kEnvironments; ++e) begin(e);
  while (stream.records.size() < record_count) {
    // Environments step in a random order, so references reach back unevenly.
    const int e = static_cast<int>(random() % kEnvironments);
    Env& env = envs[e];
    const int action = static_cast<int>(random() % kActions);
    const double reward = static_cast<int>(random() % 5) - 2;
    const std::vector<uint8_t> next = frame();
    env.stack.pop_front();
    env.stack.push_back(next);
    const bool end = --env.steps_left == 0;
    const bool terminated = end && random() % 2 == 0;
    const bool truncated = end && !terminated;
    CHECK(env.nstep->AddStep(action, reward, stacked(env), terminated, truncated, &completed).ok());
    CHECK(recorder.AddStep(e, action, reward, next, terminated, truncated, &records).ok());
    append();
    if (end) begin(e);
  }
  return stream;
}

}  // namespace dreplay::learner::frame_stream_testing

#endif  // DREPLAY_LEARNER_CLIENT_FRAME_STREAM_TESTING_H_
