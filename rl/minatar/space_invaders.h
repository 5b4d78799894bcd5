// Copyright dreplay authors.
//
// space_invaders.h: MinAtar's Space Invaders (v1.0.15
// `environments/space_invaders.py`).
//
// The cannon on the bottom row shoots up at a 4x6 block of aliens that
// sweeps sideways and steps down at the edges; +1 per alien shot. The alien
// nearest the cannon's column shoots every 10 frames. The episode ends when
// an alien or an alien's bullet reaches the cannon, or the block reaches the
// bottom. A cleared wave is replaced, and with difficulty ramping it moves
// faster. Channels: 0 cannon, 1 alien, 2 alien moving left, 3 alien moving
// right, 4 friendly bullet, 5 enemy bullet.
//
// The game draws nothing from the generator.

#ifndef DREPLAY_RL_MINATAR_SPACE_INVADERS_H_
#define DREPLAY_RL_MINATAR_SPACE_INVADERS_H_

#include <array>

#include "rl/minatar/game.h"

namespace dreplay::rl::minatar {

class SpaceInvaders final : public Game {
 public:
  static constexpr int kChannels = 6;

  SpaceInvaders(LegacyRandomState* random, bool ramping) : Game(random), ramping_(ramping) {
    Reset();
  }

  int channels() const override { return kChannels; }
  std::vector<int> minimal_action_set() const override { return {kNoop, kLeft, kRight, kFire}; }
  void Reset() override;
  Outcome Act(int action) override;
  void WriteState(absl::Span<uint8_t> state) const override;

 private:
  // A 10x10 map of 0/1 cells, row-major.
  using Map = std::array<uint8_t, kGridSize * kGridSize>;

  void MoveAliens();
  // The lowest alien of the column nearest the cannon (ties: the left one).
  void AlienShoots();

  const bool ramping_;
  int pos_ = 0;  // the cannon's column
  Map friendly_bullets_{};
  Map enemy_bullets_{};
  Map aliens_{};
  int alien_dir_ = 0;  // -1 left, +1 right
  int enemy_move_interval_ = 0;
  int alien_move_timer_ = 0;
  int alien_shot_timer_ = 0;
  int ramp_index_ = 0;
  int shot_timer_ = 0;
  bool terminal_ = false;
};

}  // namespace dreplay::rl::minatar

#endif  // DREPLAY_RL_MINATAR_SPACE_INVADERS_H_
