// Copyright dreplay authors.

#include "rl/minatar/seaquest.h"

#include <algorithm>

namespace dreplay::rl::minatar {
namespace {

constexpr int kMaxOxygen = 200;
constexpr int kInitSpawnSpeed = 20;
constexpr int kDiverSpawnSpeed = 30;
constexpr int kInitMoveInterval = 5;
constexpr int kShotCoolDown = 5;
constexpr int kEnemyShotInterval = 10;
constexpr int kDiverMoveInterval = 5;
constexpr int kMaxDivers = 6;

int Step(bool right) { return right ? 1 : -1; }
bool OffScreen(int x) { return x < 0 || x > 9; }

}  // namespace

void Seaquest::Reset() {
  oxygen_ = kMaxOxygen;
  diver_count_ = 0;
  sub_x_ = 5;
  sub_y_ = 0;
  sub_right_ = false;
  f_bullets_.Clear();
  e_bullets_.Clear();
  e_fish_.Clear();
  e_subs_.Clear();
  divers_.Clear();
  e_spawn_speed_ = kInitSpawnSpeed;
  e_spawn_timer_ = e_spawn_speed_;
  d_spawn_timer_ = kDiverSpawnSpeed;
  move_speed_ = kInitMoveInterval;
  ramp_index_ = 0;
  shot_timer_ = 0;
  surface_ = true;
  terminal_ = false;
}

void Seaquest::SpawnEnemy() {
  const bool right = random().Rand() < 1.0 / 2;
  const bool is_sub = random().Rand() < 1.0 / 3;
  const int x = right ? 0 : 9;
  const int y = static_cast<int>(random().RandInt(1, 9));
  // No spawn in a row where something already moves the other way.
  for (const auto& sub : e_subs_.items()) {
    if (sub->y == y && sub->right != right) return;
  }
  for (const auto& fish : e_fish_.items()) {
    if (fish->y == y && fish->right != right) return;
  }
  if (is_sub) {
    e_subs_.Append(Sub{x, y, right, move_speed_, kEnemyShotInterval});
  } else {
    e_fish_.Append(Mover{x, y, right, move_speed_});
  }
}

void Seaquest::SpawnDiver() {
  const bool right = random().Rand() < 1.0 / 2;
  const int x = right ? 0 : 9;
  const int y = static_cast<int>(random().RandInt(1, 9));
  divers_.Append(Mover{x, y, right, kDiverMoveInterval});
}

void Seaquest::MovePlayer(int action) {
  if (action == kFire && shot_timer_ == 0) {
    f_bullets_.Append(Bullet{sub_x_, sub_y_, sub_right_});
    shot_timer_ = kShotCoolDown;
  } else if (action == kLeft) {
    sub_x_ = std::max(0, sub_x_ - 1);
    sub_right_ = false;
  } else if (action == kRight) {
    sub_x_ = std::min(9, sub_x_ + 1);
    sub_right_ = true;
  } else if (action == kUp) {
    sub_y_ = std::max(0, sub_y_ - 1);
  } else if (action == kDown) {
    sub_y_ = std::min(8, sub_y_ + 1);
  }
}

void Seaquest::MoveFriendlyBullets(Outcome& out) {
  f_bullets_.ForEachReversed([&](Bullet& bullet) {
    bullet.x += Step(bullet.right);
    if (OffScreen(bullet.x)) {
      f_bullets_.Remove(bullet);
      return;
    }
    for (size_t i = 0; i < e_fish_.size(); ++i) {
      if (e_fish_[i].x == bullet.x && e_fish_[i].y == bullet.y) {
        e_fish_.Remove(e_fish_[i]);
        f_bullets_.Remove(bullet);
        out.reward += 1;
        return;
      }
    }
    for (size_t i = 0; i < e_subs_.size(); ++i) {
      if (e_subs_[i].x == bullet.x && e_subs_[i].y == bullet.y) {
        e_subs_.Remove(e_subs_[i]);
        f_bullets_.Remove(bullet);
        out.reward += 1;
        return;
      }
    }
  });
}

void Seaquest::MoveDivers() {
  divers_.ForEachReversed([&](Mover& diver) {
    if (OnPlayer(diver.x, diver.y) && diver_count_ < kMaxDivers) {
      divers_.Remove(diver);
      ++diver_count_;
    } else if (diver.move_timer == 0) {
      diver.move_timer = kDiverMoveInterval;
      diver.x += Step(diver.right);
      if (OffScreen(diver.x)) {
        divers_.Remove(diver);
      } else if (OnPlayer(diver.x, diver.y) && diver_count_ < kMaxDivers) {
        divers_.Remove(diver);
        ++diver_count_;
      }
    } else {
      --diver.move_timer;
    }
  });
}

void Seaquest::MoveSubs(Outcome& out) {
  e_subs_.ForEachReversed([&](Sub& sub) {
    if (OnPlayer(sub.x, sub.y)) terminal_ = true;
    if (sub.move_timer == 0) {
      sub.move_timer = move_speed_;
      sub.x += Step(sub.right);
      if (OffScreen(sub.x)) {
        e_subs_.Remove(sub);
      } else if (OnPlayer(sub.x, sub.y)) {
        terminal_ = true;
      } else {
        for (size_t i = 0; i < f_bullets_.size(); ++i) {
          if (f_bullets_[i].x == sub.x && f_bullets_[i].y == sub.y) {
            e_subs_.Remove(sub);
            f_bullets_.Remove(f_bullets_[i]);
            out.reward += 1;
            break;
          }
        }
      }
    } else {
      --sub.move_timer;
    }
    // A sub removed above still shoots this frame, as in the reference.
    if (sub.shot_timer == 0) {
      sub.shot_timer = kEnemyShotInterval;
      e_bullets_.Append(Bullet{sub.x, sub.y, sub.right});
    } else {
      --sub.shot_timer;
    }
  });
}

void Seaquest::MoveEnemyBullets() {
  e_bullets_.ForEachReversed([&](Bullet& bullet) {
    if (OnPlayer(bullet.x, bullet.y)) terminal_ = true;
    bullet.x += Step(bullet.right);
    if (OffScreen(bullet.x)) {
      e_bullets_.Remove(bullet);
    } else if (OnPlayer(bullet.x, bullet.y)) {
      terminal_ = true;
    }
  });
}

void Seaquest::MoveFish(Outcome& out) {
  e_fish_.ForEachReversed([&](Mover& fish) {
    if (OnPlayer(fish.x, fish.y)) terminal_ = true;
    if (fish.move_timer != 0) {
      --fish.move_timer;
      return;
    }
    fish.move_timer = move_speed_;
    fish.x += Step(fish.right);
    if (OffScreen(fish.x)) {
      e_fish_.Remove(fish);
    } else if (OnPlayer(fish.x, fish.y)) {
      terminal_ = true;
    } else {
      for (size_t i = 0; i < f_bullets_.size(); ++i) {
        if (f_bullets_[i].x == fish.x && f_bullets_[i].y == fish.y) {
          e_fish_.Remove(fish);
          f_bullets_.Remove(f_bullets_[i]);
          out.reward += 1;
          break;
        }
      }
    }
  });
}

int Seaquest::Surface() {
  surface_ = true;
  int reward = 0;
  if (diver_count_ == kMaxDivers) {
    diver_count_ = 0;
    reward = FloorDiv(oxygen_ * 10, kMaxOxygen);
  }
  oxygen_ = kMaxOxygen;
  diver_count_ -= 1;
  if (ramping_ && (e_spawn_speed_ > 1 || move_speed_ > 2)) {
    if (move_speed_ > 2 && ramp_index_ % 2 != 0) --move_speed_;
    if (e_spawn_speed_ > 1) --e_spawn_speed_;
    ++ramp_index_;
  }
  return reward;
}

void Seaquest::UpdateTimersAndAir(Outcome& out) {
  if (e_spawn_timer_ > 0) --e_spawn_timer_;
  if (d_spawn_timer_ > 0) --d_spawn_timer_;
  if (shot_timer_ > 0) --shot_timer_;
  if (oxygen_ <= 0) terminal_ = true;
  if (sub_y_ > 0) {
    --oxygen_;
    surface_ = false;
  } else if (!surface_) {
    if (diver_count_ == 0) {
      terminal_ = true;
    } else {
      out.reward += Surface();
    }
  }
}

Outcome Seaquest::Act(int action) {
  Outcome out;
  if (terminal_) return {0, true};
  if (e_spawn_timer_ == 0) {
    SpawnEnemy();
    e_spawn_timer_ = e_spawn_speed_;
  }
  if (d_spawn_timer_ == 0) {
    SpawnDiver();
    d_spawn_timer_ = kDiverSpawnSpeed;
  }
  MovePlayer(action);
  MoveFriendlyBullets(out);
  MoveDivers();
  MoveSubs(out);
  MoveEnemyBullets();
  MoveFish(out);
  UpdateTimersAndAir(out);
  out.terminal = terminal_;
  return out;
}

void Seaquest::WriteState(absl::Span<uint8_t> state) const {
  std::fill(state.begin(), state.end(), 0);
  SetCell(state, kChannels, sub_y_, sub_x_, 0);
  SetCell(state, kChannels, sub_y_, sub_right_ ? sub_x_ - 1 : sub_x_ + 1, 1);
  const int oxygen_cells = FloorDiv(std::max(0, oxygen_) * 10, kMaxOxygen);
  for (int column = 0; column < oxygen_cells; ++column) SetCell(state, kChannels, 9, column, 7);
  // The slice [9 - diver_count : 9]: empty when the count is negative.
  for (int column = std::max(0, 9 - diver_count_); column < 9; ++column) {
    SetCell(state, kChannels, 9, column, 8);
  }
  for (const auto& b : f_bullets_.items()) SetCell(state, kChannels, b->y, b->x, 2);
  for (const auto& b : e_bullets_.items()) SetCell(state, kChannels, b->y, b->x, 4);
  auto draw = [&](int x, int y, bool right, int channel) {
    SetCell(state, kChannels, y, x, channel);
    const int back_x = right ? x - 1 : x + 1;
    if (back_x >= 0 && back_x <= 9) SetCell(state, kChannels, y, back_x, 3);
  };
  for (const auto& f : e_fish_.items()) draw(f->x, f->y, f->right, 5);
  for (const auto& s : e_subs_.items()) draw(s->x, s->y, s->right, 6);
  for (const auto& d : divers_.items()) draw(d->x, d->y, d->right, 9);
}

}  // namespace dreplay::rl::minatar
