// Copyright dreplay authors.
//
// rl_bindings.h: the torch-free parts of rl/ for Python: the environments
// (rl/make_environment.h; bit-exact with Gymnasium's classic control), and
// the params format (rl/params_format.h) that carries Q-network parameters
// from the learner to the actors, so that parameters Python publishes are
// the bytes a C++ actor loads (python/dreplay/params.py builds on it).
//
// Thread safety: an Environment is used by one thread at a time; the params
// functions are pure.

#ifndef DREPLAY_PYTHON_RL_BINDINGS_H_
#define DREPLAY_PYTHON_RL_BINDINGS_H_

#include "pybind11/pybind11.h"

namespace dreplay::python {

// Binds Environment, make_environment(), environment_names() and the params
// format functions.
void RegisterRl(pybind11::module_& m);

}  // namespace dreplay::python

#endif  // DREPLAY_PYTHON_RL_BINDINGS_H_
