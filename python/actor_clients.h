// Copyright dreplay authors.
//
// actor_clients.h: the actor's clients for Python: the experience writer
// (actor_client/experience_writer.h) and the parameter fetcher
// (actor_client/param_fetcher.h), each bound as a class that holds its
// Session. Every call that may wait (Append, Flush, FetchIfNewer) runs
// without the GIL, under the session's lock (python/session.h).

#ifndef DREPLAY_PYTHON_ACTOR_CLIENTS_H_
#define DREPLAY_PYTHON_ACTOR_CLIENTS_H_

#include "pybind11/pybind11.h"

namespace dreplay::python {

// Binds ExperienceWriter and ParamFetcher.
void RegisterActorClients(pybind11::module_& m);

}  // namespace dreplay::python

#endif  // DREPLAY_PYTHON_ACTOR_CLIENTS_H_
