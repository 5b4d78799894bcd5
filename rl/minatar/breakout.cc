// Copyright dreplay authors.

#include "rl/minatar/breakout.h"

#include <algorithm>

namespace dreplay::rl::minatar {
namespace {

// How a direction changes when the ball bounces off a side wall, off the top
// or a brick, and off the paddle's far edge.
constexpr int kSideBounce[4] = {1, 0, 3, 2};
constexpr int kVerticalBounce[4] = {3, 2, 1, 0};
constexpr int kCornerBounce[4] = {2, 3, 0, 1};
constexpr int kStepX[4] = {-1, 1, 1, -1};
constexpr int kStepY[4] = {-1, -1, 1, 1};

}  // namespace

void Breakout::FillBrickRows() {
  for (int row = 1; row <= 3; ++row) {
    for (int column = 0; column < kGridSize; ++column) bricks_[row * kGridSize + column] = 1;
  }
}

void Breakout::Reset() {
  ball_y_ = 3;
  const bool from_right = random().RandInt(0, 2) == 1;
  ball_x_ = from_right ? 9 : 0;
  ball_dir_ = from_right ? 3 : 2;
  pos_ = 4;
  bricks_.fill(0);
  FillBrickRows();
  strike_ = false;
  last_x_ = ball_x_;
  last_y_ = ball_y_;
  terminal_ = false;
}

Outcome Breakout::Act(int action) {
  Outcome out;
  if (terminal_) return {0, true};
  if (action == kLeft) {
    pos_ = std::max(0, pos_ - 1);
  } else if (action == kRight) {
    pos_ = std::min(9, pos_ + 1);
  }

  last_x_ = ball_x_;
  last_y_ = ball_y_;
  int new_x = ball_x_ + kStepX[ball_dir_];
  int new_y = ball_y_ + kStepY[ball_dir_];

  bool strike_toggle = false;
  if (new_x < 0 || new_x > 9) {
    new_x = std::clamp(new_x, 0, 9);
    ball_dir_ = kSideBounce[ball_dir_];
  }
  if (new_y < 0) {
    new_y = 0;
    ball_dir_ = kVerticalBounce[ball_dir_];
  } else if (Brick(new_y, new_x)) {
    strike_toggle = true;
    if (!strike_) {
      out.reward += 1;
      strike_ = true;
      bricks_[new_y * kGridSize + new_x] = 0;
      new_y = last_y_;
      ball_dir_ = kVerticalBounce[ball_dir_];
    }
  } else if (new_y == 9) {
    if (std::count(bricks_.begin(), bricks_.end(), 0) == kGridSize * kGridSize) FillBrickRows();
    if (ball_x_ == pos_) {
      ball_dir_ = kVerticalBounce[ball_dir_];
      new_y = last_y_;
    } else if (new_x == pos_) {
      ball_dir_ = kCornerBounce[ball_dir_];
      new_y = last_y_;
    } else {
      terminal_ = true;
    }
  }
  if (!strike_toggle) strike_ = false;

  ball_x_ = new_x;
  ball_y_ = new_y;
  out.terminal = terminal_;
  return out;
}

void Breakout::WriteState(absl::Span<uint8_t> state) const {
  std::fill(state.begin(), state.end(), 0);
  SetCell(state, kChannels, ball_y_, ball_x_, 1);
  SetCell(state, kChannels, 9, pos_, 0);
  SetCell(state, kChannels, last_y_, last_x_, 2);
  for (int row = 0; row < kGridSize; ++row) {
    for (int column = 0; column < kGridSize; ++column) {
      if (Brick(row, column)) SetCell(state, kChannels, row, column, 3);
    }
  }
}

}  // namespace dreplay::rl::minatar
