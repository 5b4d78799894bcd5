// Copyright dreplay authors.

#include "rl/minatar/space_invaders.h"

#include <algorithm>
#include <cstdlib>

namespace dreplay::rl::minatar {
namespace {

constexpr int kShotCoolDown = 5;
constexpr int kEnemyMoveInterval = 12;
constexpr int kEnemyShotInterval = 10;

using Map = std::array<uint8_t, kGridSize * kGridSize>;

uint8_t& At(Map& map, int row, int column) { return map[row * kGridSize + column]; }
uint8_t At(const Map& map, int row, int column) { return map[row * kGridSize + column]; }

// np.roll(map, shift, axis=0): row r moves to row (r + shift) mod 10.
Map RollRows(const Map& map, int shift) {
  Map out{};
  for (int row = 0; row < kGridSize; ++row) {
    const int to = ((row + shift) % kGridSize + kGridSize) % kGridSize;
    for (int column = 0; column < kGridSize; ++column) At(out, to, column) = At(map, row, column);
  }
  return out;
}

// np.roll(map, shift, axis=1).
Map RollColumns(const Map& map, int shift) {
  Map out{};
  for (int column = 0; column < kGridSize; ++column) {
    const int to = ((column + shift) % kGridSize + kGridSize) % kGridSize;
    for (int row = 0; row < kGridSize; ++row) At(out, row, to) = At(map, row, column);
  }
  return out;
}

bool AnyInColumn(const Map& map, int column) {
  for (int row = 0; row < kGridSize; ++row) {
    if (At(map, row, column)) return true;
  }
  return false;
}

bool AnyInRow(const Map& map, int row) {
  for (int column = 0; column < kGridSize; ++column) {
    if (At(map, row, column)) return true;
  }
  return false;
}

int Count(const Map& map) { return static_cast<int>(std::count(map.begin(), map.end(), 1)); }

void FillWave(Map& aliens) {
  for (int row = 0; row < 4; ++row) {
    for (int column = 2; column < 8; ++column) At(aliens, row, column) = 1;
  }
}

}  // namespace

void SpaceInvaders::Reset() {
  pos_ = 5;
  friendly_bullets_.fill(0);
  enemy_bullets_.fill(0);
  aliens_.fill(0);
  FillWave(aliens_);
  alien_dir_ = -1;
  enemy_move_interval_ = kEnemyMoveInterval;
  alien_move_timer_ = enemy_move_interval_;
  alien_shot_timer_ = kEnemyShotInterval;
  ramp_index_ = 0;
  shot_timer_ = 0;
  terminal_ = false;
}

void SpaceInvaders::MoveAliens() {
  alien_move_timer_ = std::min(Count(aliens_), enemy_move_interval_);
  if ((AnyInColumn(aliens_, 0) && alien_dir_ < 0) || (AnyInColumn(aliens_, 9) && alien_dir_ > 0)) {
    alien_dir_ = -alien_dir_;
    if (AnyInRow(aliens_, 9)) terminal_ = true;
    aliens_ = RollRows(aliens_, 1);
  } else {
    aliens_ = RollColumns(aliens_, alien_dir_);
  }
  if (At(aliens_, 9, pos_)) terminal_ = true;
}

void SpaceInvaders::AlienShoots() {
  // Columns by distance from the cannon; a stable sort puts the left one of
  // two at the same distance first.
  for (int distance = 0; distance < kGridSize; ++distance) {
    for (const int column : {pos_ - distance, pos_ + distance}) {
      if (column < 0 || column > 9) continue;
      for (int row = kGridSize - 1; row >= 0; --row) {
        if (At(aliens_, row, column)) {
          At(enemy_bullets_, row, column) = 1;
          return;
        }
      }
    }  // at distance 0 both are the cannon's column: searched twice, harmless
  }
  LOG(FATAL) << "no alien to shoot: the wave is refilled at the end of every frame";
}

Outcome SpaceInvaders::Act(int action) {
  Outcome out;
  if (terminal_) return {0, true};
  if (action == kFire && shot_timer_ == 0) {
    At(friendly_bullets_, 9, pos_) = 1;
    shot_timer_ = kShotCoolDown;
  } else if (action == kLeft) {
    pos_ = std::max(0, pos_ - 1);
  } else if (action == kRight) {
    pos_ = std::min(9, pos_ + 1);
  }

  friendly_bullets_ = RollRows(friendly_bullets_, -1);
  for (int column = 0; column < kGridSize; ++column) At(friendly_bullets_, 9, column) = 0;
  enemy_bullets_ = RollRows(enemy_bullets_, 1);
  for (int column = 0; column < kGridSize; ++column) At(enemy_bullets_, 0, column) = 0;
  if (At(enemy_bullets_, 9, pos_)) terminal_ = true;

  if (At(aliens_, 9, pos_)) terminal_ = true;
  if (alien_move_timer_ == 0) MoveAliens();
  if (alien_shot_timer_ == 0) {
    alien_shot_timer_ = kEnemyShotInterval;
    AlienShoots();
  }

  for (int i = 0; i < kGridSize * kGridSize; ++i) {
    if (aliens_[i] && friendly_bullets_[i]) {
      out.reward += 1;
      aliens_[i] = 0;
      friendly_bullets_[i] = 0;
    }
  }

  if (shot_timer_ > 0) --shot_timer_;
  --alien_move_timer_;
  --alien_shot_timer_;
  if (Count(aliens_) == 0) {
    if (enemy_move_interval_ > 6 && ramping_) {
      --enemy_move_interval_;
      ++ramp_index_;
    }
    FillWave(aliens_);
  }
  out.terminal = terminal_;
  return out;
}

void SpaceInvaders::WriteState(absl::Span<uint8_t> state) const {
  std::fill(state.begin(), state.end(), 0);
  SetCell(state, kChannels, 9, pos_, 0);
  const int direction_channel = alien_dir_ < 0 ? 2 : 3;
  for (int row = 0; row < kGridSize; ++row) {
    for (int column = 0; column < kGridSize; ++column) {
      if (At(aliens_, row, column)) {
        SetCell(state, kChannels, row, column, 1);
        SetCell(state, kChannels, row, column, direction_channel);
      }
      if (At(friendly_bullets_, row, column)) SetCell(state, kChannels, row, column, 4);
      if (At(enemy_bullets_, row, column)) SetCell(state, kChannels, row, column, 5);
    }
  }
}

}  // namespace dreplay::rl::minatar
