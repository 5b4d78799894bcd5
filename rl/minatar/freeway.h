// Copyright dreplay authors.
//
// freeway.h: MinAtar's Freeway (v1.0.15 `environments/freeway.py`).
//
// The chicken crosses eight lanes of cars from the bottom row to the top;
// it moves at most every 3 frames, +1 per crossing (then it is back at the
// bottom and the car speeds are drawn again), and a car sends it back to the
// bottom. Channels: 0 chicken, 1 car, 2..6 the trail of a car that moves
// every 1..5 frames.
//
// The time limit: the game itself reports `terminal` on the 2501st Act()
// of an episode (its timer starts at 2500 and ends the game when it goes
// below 0). There is no separate truncation signal.
//
// Draws, at every reset and crossing: randint(1, 6, 8) (eight speeds), then
// rand(8) (eight directions, the sign of u - 0.5). Difficulty does not ramp.

#ifndef DREPLAY_RL_MINATAR_FREEWAY_H_
#define DREPLAY_RL_MINATAR_FREEWAY_H_

#include <array>

#include "rl/minatar/game.h"

namespace dreplay::rl::minatar {

class Freeway final : public Game {
 public:
  static constexpr int kChannels = 7;
  // Act() reports terminal once the episode has lasted this many frames
  // and one more.
  static constexpr int kTimeLimit = 2500;

  explicit Freeway(LegacyRandomState* random) : Game(random) { Reset(); }

  int channels() const override { return kChannels; }
  std::vector<int> minimal_action_set() const override { return {kNoop, kUp, kDown}; }
  void Reset() override;
  Outcome Act(int action) override;
  void WriteState(absl::Span<uint8_t> state) const override;

 private:
  struct Car {
    int x = 0;
    int y = 0;
    int timer = 0;
    int speed = 0;  // frames per move, signed by direction (> 0: right)
  };
  static constexpr int kCars = 8;

  void RandomizeCars(bool initialize);
  void MoveCars();

  std::array<Car, kCars> cars_;
  int pos_ = 0;  // the chicken's row; its column is always 4
  int move_timer_ = 0;
  int terminate_timer_ = 0;
  bool terminal_ = false;
};

}  // namespace dreplay::rl::minatar

#endif  // DREPLAY_RL_MINATAR_FREEWAY_H_
