// Copyright dreplay authors.
//
// numpy_random.h: NumPy's legacy `numpy.random.RandomState`, reproduced
// draw for draw for the calls MinAtar makes, so that a seed gives exactly the
// reference's numbers.
//
//   LegacyRandomState random(/*seed=*/3);   // np.random.RandomState(3)
//   double u = random.Rand();                 // random.rand()
//   int64_t k = random.RandInt(1, 9);         // random.randint(1, 9)
//
// What is reproduced, and how:
//  - Seeding: `RandomState(seed)` with a Python int in [0, 2**32) runs
//    MT19937's init_genrand on it (the seeding std::mt19937 also uses), so
//    the raw 32-bit stream is std::mt19937's.
//  - `rand()` / `rand(n)`: each double is ((a >> 5) * 67108864 + (b >> 6)) /
//    2**53 from two consecutive 32-bit draws a, b.
//  - `randint(low, high)` and `randint(low, high, size)` with the default
//    dtype (int64): the closed range rng = high - 1 - low is drawn by masked
//    rejection: draw, AND with the smallest all-ones mask >= rng, retry while
//    above rng. Ranges that fit 32 bits take one 32-bit draw per try, larger
//    ones one 64-bit draw (high word first). rng == 0 (one possible value)
//    draws nothing. An array of `size` values is the same as `size` scalar
//    calls.
//
// Thread safety: none; one generator per thread.

#ifndef DREPLAY_RL_MINATAR_NUMPY_RANDOM_H_
#define DREPLAY_RL_MINATAR_NUMPY_RANDOM_H_

#include <cstdint>
#include <random>

namespace dreplay::rl::minatar {

class LegacyRandomState {
 public:
  // The largest seed legacy NumPy accepts as an integer.
  static constexpr uint64_t kMaxSeed = 0xFFFFFFFFu;

  explicit LegacyRandomState(uint32_t seed = 0) : engine_(seed) {}

  // As if newly constructed with `seed` (`RandomState(seed)`).
  void Seed(uint32_t seed) { engine_.seed(seed); }

  // One raw 32-bit output of MT19937.
  uint32_t NextUint32() { return static_cast<uint32_t>(engine_()); }

  // `rand()`: a double in [0, 1) with 53 random bits; two 32-bit draws.
  double Rand();

  // `randint(low, high)`: an integer in [low, high). REQUIRES: low < high
  // (NumPy raises ValueError otherwise; callers pass constants).
  int64_t RandInt(int64_t low, int64_t high);

 private:
  uint64_t NextUint64();

  std::mt19937 engine_;
};

}  // namespace dreplay::rl::minatar

#endif  // DREPLAY_RL_MINATAR_NUMPY_RANDOM_H_
