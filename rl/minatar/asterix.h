// Copyright dreplay authors.
//
// asterix.h: MinAtar's Asterix (v1.0.15 `environments/asterix.py`).
//
// The player moves in four directions over rows 1 to 8; enemies and gold
// spawn from the sides into one of eight rows and cross the screen. +1 per
// gold picked up; touching an enemy ends the episode. With difficulty
// ramping, spawning and movement speed up every 100 frames. Channels: 0
// player, 1 enemy, 2 trail, 3 gold.
//
// Draws, per spawn: rand() (side), rand() (gold or enemy), then randint(k)
// over the k free rows when k > 0 (no draw when k == 1, as in NumPy).

#ifndef DREPLAY_RL_MINATAR_ASTERIX_H_
#define DREPLAY_RL_MINATAR_ASTERIX_H_

#include <array>
#include <optional>

#include "rl/minatar/game.h"

namespace dreplay::rl::minatar {

class Asterix final : public Game {
 public:
  static constexpr int kChannels = 4;

  Asterix(LegacyRandomState* random, bool ramping) : Game(random), ramping_(ramping) { Reset(); }

  int channels() const override { return kChannels; }
  std::vector<int> minimal_action_set() const override {
    return {kNoop, kLeft, kUp, kRight, kDown};
  }
  void Reset() override;
  Outcome Act(int action) override;
  void WriteState(absl::Span<uint8_t> state) const override;

 private:
  struct Entity {
    int x = 0;
    int y = 0;
    bool right = false;  // moving right (spawned on the left)
    bool gold = false;
  };
  static constexpr int kSlots = 8;  // one per row 1..8

  void SpawnEntity();
  // Picks up gold or hits an enemy in `slot` if it is on the player.
  void Collide(int slot, Outcome& out);
  void RampDifficulty();

  const bool ramping_;
  int player_x_ = 0;
  int player_y_ = 0;
  std::array<std::optional<Entity>, kSlots> entities_;
  int spawn_speed_ = 0;
  int spawn_timer_ = 0;
  int move_speed_ = 0;
  int move_timer_ = 0;
  int ramp_timer_ = 0;
  int ramp_index_ = 0;
  bool terminal_ = false;
};

}  // namespace dreplay::rl::minatar

#endif  // DREPLAY_RL_MINATAR_ASTERIX_H_
