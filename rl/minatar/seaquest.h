// Copyright dreplay authors.
//
// seaquest.h: MinAtar's Seaquest (v1.0.15 `environments/seaquest.py`,
// which includes the oxygen-bar fix of 1.0.11).
//
// The player's submarine (two cells: front and back) shoots enemy fish and
// submarines (+1 each), picks up divers, and must surface for air. Surfacing
// with divers costs one diver and refills the oxygen; surfacing with six
// gives +1 per oxygen bar cell left and leaves the diver count at -1 (the
// reference zeroes it, then takes the diver every surfacing costs; we do
// the same, and from then on surfacing never ends the game). The episode
// ends on contact with a fish, a submarine or an enemy bullet, when the
// oxygen runs out, or when surfacing with no diver. With difficulty ramping
// each surfacing speeds up spawning and movement. Channels: 0 sub front,
// 1 sub back, 2 friendly bullet, 3 trail, 4 enemy bullet, 5 enemy fish, 6
// enemy sub, 7 oxygen gauge, 8 diver gauge, 9 diver.
//
// The entities live in lists that the reference mutates while it iterates
// over them (py_list.h); the port keeps those semantics, so that even the
// rare frames where Python visits an element twice or skips one come out
// the same.
//
// Draws: an enemy spawn is rand() (side), rand() (sub or fish), randint(1,
// 9) (row); a diver spawn is rand() (side), randint(1, 9) (row).

#ifndef DREPLAY_RL_MINATAR_SEAQUEST_H_
#define DREPLAY_RL_MINATAR_SEAQUEST_H_

#include "rl/minatar/game.h"
#include "rl/minatar/py_list.h"

namespace dreplay::rl::minatar {

class Seaquest final : public Game {
 public:
  static constexpr int kChannels = 10;

  Seaquest(LegacyRandomState* random, bool ramping) : Game(random), ramping_(ramping) { Reset(); }

  int channels() const override { return kChannels; }
  std::vector<int> minimal_action_set() const override {
    return {kNoop, kLeft, kUp, kRight, kDown, kFire};
  }
  void Reset() override;
  Outcome Act(int action) override;
  void WriteState(absl::Span<uint8_t> state) const override;

 private:
  // The reference's lists: [x, y, direction], [x, y, direction, move timer],
  // [x, y, direction, move timer, shot timer]; compared field by field.
  struct Bullet {
    int x, y;
    bool right;
    bool operator==(const Bullet& o) const { return x == o.x && y == o.y && right == o.right; }
  };
  struct Mover {  // a fish or a diver
    int x, y;
    bool right;
    int move_timer;
    bool operator==(const Mover& o) const {
      return x == o.x && y == o.y && right == o.right && move_timer == o.move_timer;
    }
  };
  struct Sub {
    int x, y;
    bool right;
    int move_timer, shot_timer;
    bool operator==(const Sub& o) const {
      return x == o.x && y == o.y && right == o.right && move_timer == o.move_timer &&
             shot_timer == o.shot_timer;
    }
  };

  void SpawnEnemy();
  void SpawnDiver();
  void MovePlayer(int action);
  void MoveFriendlyBullets(Outcome& out);
  void MoveDivers();
  void MoveSubs(Outcome& out);
  void MoveEnemyBullets();
  void MoveFish(Outcome& out);
  void UpdateTimersAndAir(Outcome& out);
  int Surface();
  bool OnPlayer(int x, int y) const { return x == sub_x_ && y == sub_y_; }

  const bool ramping_;
  int oxygen_ = 0;
  int diver_count_ = 0;
  int sub_x_ = 0;
  int sub_y_ = 0;
  bool sub_right_ = false;  // facing right
  PyList<Bullet> f_bullets_;
  PyList<Bullet> e_bullets_;
  PyList<Mover> e_fish_;
  PyList<Sub> e_subs_;
  PyList<Mover> divers_;
  int e_spawn_speed_ = 0;
  int e_spawn_timer_ = 0;
  int d_spawn_timer_ = 0;
  int move_speed_ = 0;
  int ramp_index_ = 0;
  int shot_timer_ = 0;
  bool surface_ = false;
  bool terminal_ = false;
};

}  // namespace dreplay::rl::minatar

#endif  // DREPLAY_RL_MINATAR_SEAQUEST_H_
