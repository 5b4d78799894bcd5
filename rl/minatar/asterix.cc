// Copyright dreplay authors.

#include "rl/minatar/asterix.h"

#include <algorithm>

namespace dreplay::rl::minatar {
namespace {

constexpr int kRampInterval = 100;
constexpr int kInitSpawnSpeed = 10;
constexpr int kInitMoveInterval = 5;

}  // namespace

void Asterix::Reset() {
  player_x_ = 5;
  player_y_ = 5;
  entities_.fill(std::nullopt);
  spawn_speed_ = kInitSpawnSpeed;
  spawn_timer_ = spawn_speed_;
  move_speed_ = kInitMoveInterval;
  move_timer_ = move_speed_;
  ramp_timer_ = kRampInterval;
  ramp_index_ = 0;
  terminal_ = false;
}

void Asterix::SpawnEntity() {
  const bool right = random().Rand() < 1.0 / 2;
  const bool gold = random().Rand() < 1.0 / 3;
  const int x = right ? 0 : 9;
  std::vector<int> free_slots;
  for (int i = 0; i < kSlots; ++i) {
    if (!entities_[i].has_value()) free_slots.push_back(i);
  }
  if (free_slots.empty()) return;
  const int slot = free_slots[random().RandInt(0, static_cast<int64_t>(free_slots.size()))];
  entities_[slot] = Entity{x, slot + 1, right, gold};
}

void Asterix::Collide(int slot, Outcome& out) {
  const std::optional<Entity>& e = entities_[slot];
  if (!e.has_value() || e->x != player_x_ || e->y != player_y_) return;
  if (e->gold) {
    entities_[slot].reset();
    out.reward += 1;
  } else {
    terminal_ = true;
  }
}

void Asterix::RampDifficulty() {
  if (!ramping_ || (spawn_speed_ <= 1 && move_speed_ <= 1)) return;
  if (ramp_timer_ >= 0) {
    --ramp_timer_;
    return;
  }
  if (move_speed_ > 1 && ramp_index_ % 2 != 0) --move_speed_;
  if (spawn_speed_ > 1) --spawn_speed_;
  ++ramp_index_;
  ramp_timer_ = kRampInterval;
}

Outcome Asterix::Act(int action) {
  Outcome out;
  if (terminal_) return {0, true};
  if (spawn_timer_ == 0) {
    SpawnEntity();
    spawn_timer_ = spawn_speed_;
  }
  if (action == kLeft) {
    player_x_ = std::max(0, player_x_ - 1);
  } else if (action == kRight) {
    player_x_ = std::min(9, player_x_ + 1);
  } else if (action == kUp) {
    player_y_ = std::max(1, player_y_ - 1);
  } else if (action == kDown) {
    player_y_ = std::min(8, player_y_ + 1);
  }

  for (int i = 0; i < kSlots; ++i) Collide(i, out);
  if (move_timer_ == 0) {
    move_timer_ = move_speed_;
    for (int i = 0; i < kSlots; ++i) {
      std::optional<Entity>& e = entities_[i];
      if (!e.has_value()) continue;
      e->x += e->right ? 1 : -1;
      if (e->x < 0 || e->x > 9) {
        e.reset();  // off the screen: it cannot be on the player
      } else {
        Collide(i, out);
      }
    }
  }
  --spawn_timer_;
  --move_timer_;
  RampDifficulty();
  out.terminal = terminal_;
  return out;
}

void Asterix::WriteState(absl::Span<uint8_t> state) const {
  std::fill(state.begin(), state.end(), 0);
  SetCell(state, kChannels, player_y_, player_x_, 0);
  for (const std::optional<Entity>& e : entities_) {
    if (!e.has_value()) continue;
    SetCell(state, kChannels, e->y, e->x, e->gold ? 3 : 1);
    const int back_x = e->right ? e->x - 1 : e->x + 1;
    if (back_x >= 0 && back_x <= 9) SetCell(state, kChannels, e->y, back_x, 2);
  }
}

}  // namespace dreplay::rl::minatar
