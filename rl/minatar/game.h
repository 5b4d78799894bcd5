// Copyright dreplay authors.
//
// game.h: the interface of the five MinAtar games (rl/minatar/*.h), ported
// from MinAtar v1.0.15's `minatar/environments/*.py`, and the grid helpers
// they share.
//
// A game is a 10x10 grid seen through C boolean channels. It draws all its
// randomness from a LegacyRandomState it does not own (in MinAtar the game
// and the Environment wrapper share one), so the order of its draws is part
// of its contract and is kept exactly as in the reference.
//
// Thread safety: none; a game and its generator belong to one thread.

#ifndef DREPLAY_RL_MINATAR_GAME_H_
#define DREPLAY_RL_MINATAR_GAME_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "glog/logging.h"
#include "rl/minatar/numpy_random.h"

namespace dreplay::rl::minatar {

// The grid is kGridSize x kGridSize cells.
inline constexpr int kGridSize = 10;

// Every game takes the same six actions, MinAtar's action map
// ['n', 'l', 'u', 'r', 'd', 'f'].
enum Action : int { kNoop = 0, kLeft = 1, kUp = 2, kRight = 3, kDown = 4, kFire = 5 };
inline constexpr int kActionCount = 6;

// The outcome of one Act(). Rewards are integers in every game.
struct Outcome {
  int reward = 0;
  bool terminal = false;
};

class Game {
 public:
  virtual ~Game() = default;
  Game(const Game&) = delete;
  Game& operator=(const Game&) = delete;

  // The number of channels C of the state.
  virtual int channels() const = 0;

  // The actions that have a distinct effect in this game, in the reference's
  // order.
  virtual std::vector<int> minimal_action_set() const = 0;

  // Starts an episode; may draw from the generator.
  virtual void Reset() = 0;

  // One frame with `action`. After a terminal frame it returns {0, true}
  // and changes nothing, as the reference does. REQUIRES: 0 <= action <
  // kActionCount.
  virtual Outcome Act(int action) = 0;

  // Writes the state as 10x10xC bytes (0 or 1) in C order (row, column,
  // channel). REQUIRES: state.size() == kGridSize * kGridSize * channels().
  // Writes every byte.
  virtual void WriteState(absl::Span<uint8_t> state) const = 0;

 protected:
  // `random` must outlive the game.
  explicit Game(LegacyRandomState* random) : random_(*random) {}

  LegacyRandomState& random() { return random_; }

 private:
  LegacyRandomState& random_;
};

// Sets cell (row, column) of `channel` in a 10x10xC state, indexing as NumPy
// does: -10 <= index < 0 counts from the end. An index the reference could
// not use (NumPy would raise) is our bug.
inline void SetCell(absl::Span<uint8_t> state, int channels, int row, int column, int channel) {
  CHECK(row >= -kGridSize && row < kGridSize) << "row " << row;
  CHECK(column >= -kGridSize && column < kGridSize) << "column " << column;
  if (row < 0) row += kGridSize;
  if (column < 0) column += kGridSize;
  state[(row * kGridSize + column) * channels + channel] = 1;
}

// Python's floor division (`//`) on ints. REQUIRES: b > 0.
inline int FloorDiv(int a, int b) {
  const int q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

}  // namespace dreplay::rl::minatar

#endif  // DREPLAY_RL_MINATAR_GAME_H_
