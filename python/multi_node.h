// Copyright dreplay authors.
//
// multi_node.h: dreplay.connect([...]) for a learner over several buffer
// nodes (edge sites, buffer placement): one provider, a session and a
// learner service per node, composed by learner_client/multi_node_io.h. Each
// batch is made by the shard policy (exact global prioritization by
// default) with its importance-sampling weights, its priorities go back to
// the nodes its rows came from, and parameters are published to every node
// (learner_client/multi_node_source.h, docs/edge-sites.md).
//
// Thread safety as session.h: every bound call releases the GIL, then
// takes the learner's lock.

#ifndef DREPLAY_PYTHON_MULTI_NODE_H_
#define DREPLAY_PYTHON_MULTI_NODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "pybind11/pybind11.h"

namespace dreplay::python {

// What dreplay.connect() takes for several servers.
struct MultiConnectArgs {
  std::vector<std::string> servers;  // HOST:PORT each, >= 1
  // Each node's emulated link (soft provider), in the order of `servers`;
  // empty: `link` for every node.
  std::vector<std::string> links;
  std::string link = "none";
  std::string token;
  std::string token_file;
  std::string provider = "auto";
  bool insecure = false;
  double connect_timeout_s = 10;
  bool learner_cache = true;
  std::string shard_policy = "exact";
  double node_timeout_s = 1;
  double node_start_timeout_s = 30;
  uint64_t seed = 1;
};

void RegisterMultiNode(pybind11::module_& m);

}  // namespace dreplay::python

#endif  // DREPLAY_PYTHON_MULTI_NODE_H_
