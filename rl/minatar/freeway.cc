// Copyright dreplay authors.

#include "rl/minatar/freeway.h"

#include <algorithm>
#include <cstdlib>

namespace dreplay::rl::minatar {
namespace {

constexpr int kPlayerSpeed = 3;
constexpr int kChickenColumn = 4;

}  // namespace

void Freeway::RandomizeCars(bool initialize) {
  std::array<int, kCars> speeds;
  for (int& s : speeds) s = static_cast<int>(random().RandInt(1, 6));
  for (int& s : speeds) {
    const double d = random().Rand() - 0.5;  // np.sign: 0 stays 0
    s *= (d > 0) - (d < 0);
  }
  for (int i = 0; i < kCars; ++i) {
    if (initialize) {
      cars_[i] = Car{0, i + 1, std::abs(speeds[i]), speeds[i]};
    } else {
      cars_[i].timer = std::abs(speeds[i]);
      cars_[i].speed = speeds[i];
    }
  }
}

void Freeway::Reset() {
  RandomizeCars(/*initialize=*/true);
  pos_ = 9;
  move_timer_ = kPlayerSpeed;
  terminate_timer_ = kTimeLimit;
  terminal_ = false;
}

void Freeway::MoveCars() {
  for (Car& car : cars_) {
    if (car.x == kChickenColumn && car.y == pos_) pos_ = 9;
    if (car.timer == 0) {
      car.timer = std::abs(car.speed);
      car.x += car.speed > 0 ? 1 : -1;
      if (car.x < 0) {
        car.x = 9;
      } else if (car.x > 9) {
        car.x = 0;
      }
      if (car.x == kChickenColumn && car.y == pos_) pos_ = 9;
    } else {
      --car.timer;
    }
  }
}

Outcome Freeway::Act(int action) {
  Outcome out;
  if (terminal_) return {0, true};
  if (action == kUp && move_timer_ == 0) {
    move_timer_ = kPlayerSpeed;
    pos_ = std::max(0, pos_ - 1);
  } else if (action == kDown && move_timer_ == 0) {
    move_timer_ = kPlayerSpeed;
    pos_ = std::min(9, pos_ + 1);
  }
  if (pos_ == 0) {
    out.reward += 1;
    RandomizeCars(/*initialize=*/false);
    pos_ = 9;
  }
  MoveCars();
  if (move_timer_ > 0) --move_timer_;
  --terminate_timer_;
  if (terminate_timer_ < 0) terminal_ = true;
  out.terminal = terminal_;
  return out;
}

void Freeway::WriteState(absl::Span<uint8_t> state) const {
  std::fill(state.begin(), state.end(), 0);
  SetCell(state, kChannels, pos_, kChickenColumn, 0);
  // The reference picks the trail channel by |speed| in 1..5 and, for a
  // speed of 0 (u == 0.5 exactly, about 2**-53 per draw), keeps the previous
  // car's channel; we do the same, and draw no trail for a first car of
  // speed 0, where the reference raises.
  int trail = -1;
  for (const Car& car : cars_) {
    SetCell(state, kChannels, car.y, car.x, 1);
    int back_x = car.speed > 0 ? car.x - 1 : car.x + 1;
    if (back_x < 0) {
      back_x = 9;
    } else if (back_x > 9) {
      back_x = 0;
    }
    const int magnitude = std::abs(car.speed);
    if (magnitude >= 1 && magnitude <= 5) trail = 1 + magnitude;
    if (trail >= 0) SetCell(state, kChannels, car.y, back_x, trail);
  }
}

}  // namespace dreplay::rl::minatar
