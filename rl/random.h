// Copyright dreplay authors.
//
// random.h: a small seeded random number generator for environments and
// policies.
//
// Random wraps std::mt19937_64, whose output sequence the C++ standard fixes,
// so a seed gives the same numbers on every platform and compiler. It does not
// reproduce NumPy's bit stream (PCG64 behind SeedSequence): a seeded reset
// here draws from the same distribution as the Python reference, not the same
// numbers.
//
// Uniform(low, high) is computed as NumPy's Generator.uniform computes it,
// `low + (high - low) * u`, with u a double in [0, 1) made of the top 53 bits
// of one 64-bit draw.
//
// Thread safety: none; one Random per thread.

#ifndef DREPLAY_RL_RANDOM_H_
#define DREPLAY_RL_RANDOM_H_

#include <cstdint>
#include <random>

namespace dreplay::rl {

class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}

  // Re-seeds the generator, as if newly constructed with `seed`.
  void Seed(uint64_t seed) { engine_.seed(seed); }

  // A double in [0, 1) with 53 random bits.
  double UniformUnit() {
    constexpr double kTwoToMinus53 = 1.0 / 9007199254740992.0;
    return static_cast<double>(engine_() >> 11) * kTwoToMinus53;
  }

  // low + (high - low) * u with u in [0, 1).
  double Uniform(double low, double high) { return low + (high - low) * UniformUnit(); }

  // An integer uniform in [0, n). REQUIRES: n > 0.
  uint64_t UniformInt(uint64_t n) {
    // Reject the top partial block so that every value is equally likely.
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t draw = engine_();
    while (draw >= limit) draw = engine_();
    return draw % n;
  }

  // True with probability p (p <= 0: never; p >= 1: always).
  bool Bernoulli(double p) { return UniformUnit() < p; }

 private:
  std::mt19937_64 engine_;
};

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_RANDOM_H_
