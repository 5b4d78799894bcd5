// Copyright dreplay authors.
//
// monitor.h: the stats reader (client/stats_reader.h) for Python: the
// server's stats region and the actors' lines as dicts. Reads run without
// the GIL, under the session's lock (python/session.h).

#ifndef DREPLAY_PYTHON_MONITOR_H_
#define DREPLAY_PYTHON_MONITOR_H_

#include "pybind11/pybind11.h"

namespace dreplay::python {

// Binds StatsReader.
void RegisterMonitor(pybind11::module_& m);

}  // namespace dreplay::python

#endif  // DREPLAY_PYTHON_MONITOR_H_
