// Copyright dreplay authors.

#include "rl/python_math.h"

#include <cmath>

#include "gtest/gtest.h"

namespace dreplay::rl {
namespace {

// This file is compiled with -fno-builtin-pow, so std::pow below is the C
// library's, as in CPython.
TEST(PythonSquareTest, IsTheCLibraryPow) {
  // 94906267 has 27 significant bits, so its exact square needs 54: it lies
  // halfway between two doubles, where pow() and x * x may round apart.
  const double halfway = std::ldexp(94906267.0, -20);
  for (double x : {0.0, -0.5, 3.0, 0.1, -1.7e-3, halfway, -halfway}) {
    EXPECT_EQ(PythonSquare(x), std::pow(x, 2.0)) << x;
  }
}

TEST(PythonSquareTest, IsTheProductForOrdinaryValues) {
  for (double x : {0.0, -0.5, 3.0, 0.1, -1.7e-3, 12345.678}) {
    EXPECT_EQ(PythonSquare(x), x * x) << x;
  }
}

}  // namespace
}  // namespace dreplay::rl
