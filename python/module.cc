// Copyright dreplay authors.
//
// module.cc: the `dreplay._dreplay` extension. The `dreplay` package
// (python/dreplay/) is its public face; docs/python.md says how to build and
// import it.

#include "pybind11/pybind11.h"
#include "python/actor_clients.h"
#include "python/forward_clients.h"
#include "python/frame_batches.h"
#include "python/learner_clients.h"
#include "python/monitor.h"
#include "python/multi_node.h"
#include "python/rl_bindings.h"
#include "python/session.h"
#include "python/status_error.h"

PYBIND11_MODULE(_dreplay, m) {
  m.doc() = "dreplay's C++ clients and environments (use the dreplay package)";
  dreplay::python::RegisterStatusErrors(m);
  dreplay::python::RegisterSession(m);
  dreplay::python::RegisterActorClients(m);
  dreplay::python::RegisterLearnerClients(m);
  dreplay::python::RegisterMultiNode(m);
  dreplay::python::RegisterForwardClients(m);
  dreplay::python::RegisterMonitor(m);
  dreplay::python::RegisterRl(m);
  dreplay::python::RegisterFrameRecorder(m);
}
