// Copyright dreplay authors.
//
// forward_clients.h: what a Python learner that keeps its own replay
// memory reads, and what a Python actor reports:
//
//   ForwardReader   the learner placement's forward reader
//                   (learner_client/forward_reader.h: every transition the
//                   server ingests, in order, or the freshest), or, on a
//                   server started with --forward, the hybrid placement's
//                   forwarded batches (learner_client/forwarded_batch_reader.h:
//                   each transition once, as the server chose), chosen by
//                   the session's placement;
//   ActorStatsPublisher   an actor's line of counts and returns
//                   (actor_client/actor_stats_publisher.h), which the
//                   learner and monitors read.
//
// ForwardReader.next() copies what arrived out of the reader's buffers into
// arrays Python owns, as BatchReader.next() does (learner_clients.h).
// Every call that may wait runs without the GIL, under the session's lock.

#ifndef DREPLAY_PYTHON_FORWARD_CLIENTS_H_
#define DREPLAY_PYTHON_FORWARD_CLIENTS_H_

#include "pybind11/pybind11.h"

namespace dreplay::python {

// Binds ForwardReader and ActorStatsPublisher.
void RegisterForwardClients(pybind11::module_& m);

}  // namespace dreplay::python

#endif  // DREPLAY_PYTHON_FORWARD_CLIENTS_H_
