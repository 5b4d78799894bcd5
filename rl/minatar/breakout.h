// Copyright dreplay authors.
//
// breakout.h: MinAtar's Breakout (v1.0.15 `environments/breakout.py`).
//
// The paddle on the bottom row bounces a ball that travels on diagonals
// into three rows of bricks; +1 per brick broken, three new rows when all are
// gone, and the episode ends when the ball reaches the bottom row past the
// paddle. Channels: 0 paddle, 1 ball, 2 trail (the ball's last cell), 3
// brick. Reset() draws one `randint(2)` (the side the ball starts from).
// Difficulty does not ramp.

#ifndef DREPLAY_RL_MINATAR_BREAKOUT_H_
#define DREPLAY_RL_MINATAR_BREAKOUT_H_

#include <array>

#include "rl/minatar/game.h"

namespace dreplay::rl::minatar {

class Breakout final : public Game {
 public:
  static constexpr int kChannels = 4;

  explicit Breakout(LegacyRandomState* random) : Game(random) { Reset(); }

  int channels() const override { return kChannels; }
  std::vector<int> minimal_action_set() const override { return {kNoop, kLeft, kRight}; }
  void Reset() override;
  Outcome Act(int action) override;
  void WriteState(absl::Span<uint8_t> state) const override;

 private:
  bool Brick(int row, int column) const { return bricks_[row * kGridSize + column] != 0; }
  void FillBrickRows();

  int ball_x_ = 0;
  int ball_y_ = 0;
  int ball_dir_ = 0;  // 0 up-left, 1 up-right, 2 down-right, 3 down-left
  int pos_ = 0;       // the paddle's column
  int last_x_ = 0;
  int last_y_ = 0;
  bool strike_ = false;
  bool terminal_ = false;
  std::array<uint8_t, kGridSize * kGridSize> bricks_{};
};

}  // namespace dreplay::rl::minatar

#endif  // DREPLAY_RL_MINATAR_BREAKOUT_H_
