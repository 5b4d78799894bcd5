// Copyright dreplay authors.
//
// python_math.h: arithmetic that Python computes differently from the obvious
// C++ spelling.
//
// The classic-control references write squares as `x**2`. For a Python float
// and for a NumPy float64 scalar alike, that calls the C library's pow(x, 2.0),
// which is not always x * x: when the exact square lies halfway between two
// doubles, glibc's pow() and the correctly rounded product can pick different
// neighbours. C++ compilers fold pow(x, 2.0) into x * x, so this file is
// compiled with -fno-builtin-pow and every `x**2` of a reference goes through
// PythonSquare().

#ifndef DREPLAY_RL_PYTHON_MATH_H_
#define DREPLAY_RL_PYTHON_MATH_H_

namespace dreplay::rl {

// x**2 as Python evaluates it: the C library's pow(x, 2.0).
double PythonSquare(double x);

}  // namespace dreplay::rl

#endif  // DREPLAY_RL_PYTHON_MATH_H_
