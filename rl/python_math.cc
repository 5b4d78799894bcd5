// Copyright dreplay authors.
//
// Compiled with -fno-builtin-pow (see rl/BUILD) so that the call below stays a
// call to the C library.

#include "rl/python_math.h"

#include <cmath>

namespace dreplay::rl {

double PythonSquare(double x) { return std::pow(x, 2.0); }

}  // namespace dreplay::rl
