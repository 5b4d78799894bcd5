// Copyright dreplay authors.
//
// learner_clients.h: the learner's clients for Python: the batch reader
// (learner_client/batch_reader.h), the priority writer and the parameter
// publisher, each bound as a class that holds its Session. Every call that
// may wait runs without the GIL, under the session's lock
// (python/session.h).
//
// Batches and their lifetime: BatchReader.next() copies what the learner
// needs out of the reader's registered buffers before it returns (the C++
// views are valid only until the next Next()), into arrays that Python
// owns: the entries (weights, slot sequences and indices, insert times),
// the payloads ([B, max_payload] bytes and their lengths) and, when the
// reader decodes, the transitions as rl/transition.h's TransitionBatch lays
// them out (observations [B, m] float32, actions int64, rewards, discounts,
// dones, next_observations). Each array owns its memory (handed over from
// C++ without another copy), so it stays valid however many batches follow,
// and torch.from_numpy() shares it without a copy.

#ifndef DREPLAY_PYTHON_LEARNER_CLIENTS_H_
#define DREPLAY_PYTHON_LEARNER_CLIENTS_H_

#include "pybind11/pybind11.h"

namespace dreplay::python {

// Binds BatchReader, PriorityWriter and ParamPublisher.
void RegisterLearnerClients(pybind11::module_& m);

}  // namespace dreplay::python

#endif  // DREPLAY_PYTHON_LEARNER_CLIENTS_H_
