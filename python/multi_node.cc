// Copyright dreplay authors.

#include "python/multi_node.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/connection_flags.h"
#include "client/retry.h"
#include "common/status_macros.h"
#include "learner_client/multi_node_io.h"
#include "learner_client/service_io.h"
#include "pybind11/numpy.h"
#include "pybind11/stl.h"
#include "python/arrays.h"
#include "python/session.h"
#include "python/status_error.h"
#include "rl/transition.h"

namespace dreplay::python {
namespace py = pybind11;

namespace {

absl::Status CheckArgs(const MultiConnectArgs& a) {
  if (a.servers.empty()) return absl::InvalidArgumentError("no server given");
  if (!a.links.empty() && a.links.size() != a.servers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(a.links.size(), " links for ", a.servers.size(), " servers"));
  }
  if (!(a.connect_timeout_s >= 0) || !(a.node_timeout_s > 0) ||
      !(a.node_start_timeout_s >= a.node_timeout_s)) {
    return absl::InvalidArgumentError(
        "connect_timeout_s must be >= 0, node_timeout_s > 0 and node_start_timeout_s >= "
        "node_timeout_s");
  }
  return absl::OkStatus();
}

// Each node after the first must hold the same transitions (its spec: the
// environment, observation, n and gamma) and frame stacks, and stage what
// the policy needs.
absl::Status CheckNode(const protocol::LayoutConfig& first, const protocol::LayoutConfig& node,
                       const std::string& address, learner::ShardPolicy policy) {
  if (node.spec() != first.spec() || node.frame_stack != first.frame_stack) {
    return absl::FailedPreconditionError(absl::StrCat(
        "replay node ", address, " holds \"", node.spec(), "\" (frame stacks of ", node.frame_stack,
        "), the first \"", first.spec(), "\" (", first.frame_stack, ")"));
  }
  if (policy == learner::ShardPolicy::kExact && node.staging_depth < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("replay node ", address,
                     " stages 1 batch at a time: exact sampling over several nodes "
                     "needs --staging_depth >= 2 there"));
  }
  return absl::OkStatus();
}

}  // namespace

// The learner over several nodes, as Python holds it.
class MultiNodeLearner {
 public:
  // Blocking; call without the GIL.
  static absl::StatusOr<std::unique_ptr<MultiNodeLearner>> Connect(const MultiConnectArgs& a) {
    RETURN_IF_ERROR(CheckArgs(a));
    auto learner = std::unique_ptr<MultiNodeLearner>(new MultiNodeLearner());
    learner::MultiNodeOptions multi;
    ASSIGN_OR_RETURN(multi.policy, learner::ParseShardPolicy(a.shard_policy));
    multi.node_timeout = absl::Seconds(a.node_timeout_s);
    multi.start_timeout = absl::Seconds(a.node_start_timeout_s);
    multi.seed = a.seed;
    // A dead node costs a batch at most about the node timeout (as the
    // learner binary's, learner_client/learner_run.cc).
    learner::LearnerServiceIoOptions io;
    io.learner_cache = a.learner_cache;
    io.retry.reconnect_timeout = multi.node_timeout / 4;
    io.retry.attempt_deadline = multi.node_timeout / 4;
    std::vector<learner::MultiNodeIo::Node> nodes;
    for (size_t k = 0; k < a.servers.size(); ++k) {
      client::ConnectionFlags flags;
      flags.server = a.servers[k];
      flags.provider.provider = a.provider;
      flags.link = a.links.empty() ? a.link : a.links[k];
      flags.auth_token = a.token;
      flags.auth_token_file = a.token_file;
      flags.insecure = a.insecure;
      ASSIGN_OR_RETURN(client::ConnectionOptions options,
                       client::ConnectionOptionsFromFlags(flags, protocol::Role::kLearner));
      options.session.connect_deadline = absl::Seconds(a.connect_timeout_s);
      options.session.learner_cache = a.learner_cache;
      if (learner->provider_ == nullptr) {
        ASSIGN_OR_RETURN(learner->provider_, verbs::CreateProvider(options.provider));
      }
      learner::MultiNodeIo::Node node;
      node.address = a.servers[k];
      ASSIGN_OR_RETURN(node.session,
                       client::ClientSession::Connect(learner->provider_.get(), options.session));
      if (k == 0) learner->config_ = node.session->config();
      RETURN_IF_ERROR(
          CheckNode(learner->config_, node.session->config(), node.address, multi.policy));
      ASSIGN_OR_RETURN(node.service, learner::LearnerServiceIo::Create(node.session.get(), io));
      nodes.push_back(std::move(node));
    }
    multi.batch_size = learner->config_.batch_size;
    learner->type_ = ObservationTypeOf(learner->config_);
    ASSIGN_OR_RETURN(learner->io_, learner::MultiNodeIo::Create(std::move(nodes), multi,
                                                                learner->config_.observation_size,
                                                                learner->type_));
    learner->batch_ =
        std::make_unique<rl::TransitionBatch>(learner->config_.observation_size, learner->type_);
    return learner;
  }

  // Python drops it holding the GIL; a failed Connect() without it.
  ~MultiNodeLearner() {
    std::optional<py::gil_scoped_release> release;
    if (PyGILState_Check() != 0) release.emplace();
    std::lock_guard<std::mutex> lock(mu_);
    io_.reset();  // its sessions before the provider
  }

  // The next batch as a dict of arrays; DeadlineExceeded when none was
  // made within timeout_s.
  py::dict Next(double timeout_s) {
    if (!(timeout_s >= 0)) {
      throw StatusError(
          absl::InvalidArgumentError(absl::StrCat("timeout_s=", timeout_s, ": must be >= 0")));
    }
    absl::StatusOr<bool> got;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      got = io_->Next(absl::Seconds(timeout_s), batch_.get(), &weights_, &origins_);
    }
    ThrowIfError(got.status());
    if (!*got) {
      throw StatusError(absl::DeadlineExceededError(
          absl::StrCat("no batch could be made within ", timeout_s, " s")));
    }
    py::dict d;
    AddTransitionArrays(*batch_, &d);
    const auto n = static_cast<py::ssize_t>(batch_->size());
    d["weights"] = ToArray(std::vector<float>(weights_), {n});
    std::vector<uint64_t> insert_time(origins_.size());
    std::vector<int64_t> lag(origins_.size());
    for (size_t i = 0; i < origins_.size(); ++i) {
      insert_time[i] = origins_[i].insert_time_ns;
      lag[i] = origins_[i].policy_lag;
    }
    d["insert_time_ns"] = ToArray(std::move(insert_time), {static_cast<py::ssize_t>(n)});
    d["policy_lag"] = ToArray(std::move(lag), {static_cast<py::ssize_t>(n)});
    return d;
  }

  // The new priorities (|TD error|) of the batch Next() returned last, one
  // per row.
  void WritePriorities(const py::array_t<float, py::array::c_style | py::array::forcecast>& p) {
    std::vector<float> priorities(p.data(), p.data() + p.size());
    absl::Status status;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      status = io_->WritePriorities(priorities);
    }
    ThrowIfError(status);
  }

  // Publishes a params buffer to every node not away.
  void Publish(const py::bytes& data) {
    const std::string bytes = data;
    absl::Status status;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      status = io_->Publish(
          absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    }
    ThrowIfError(status);
  }

  // One dict per node: what the learner took from it.
  py::list Nodes() {
    std::vector<learner::NodeShare> shares;
    std::vector<std::string> addresses;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      shares = io_->source()->shares();
      for (size_t k = 0; k < io_->size(); ++k) addresses.push_back(io_->address(k));
    }
    py::list out;
    for (size_t k = 0; k < shares.size(); ++k) {
      const learner::NodeShare& s = shares[k];
      py::dict d;
      d["server"] = addresses[k];
      d["rows"] = s.rows;
      d["batches"] = s.batches;
      d["taken_share"] = s.taken_share;
      d["mass_share"] = s.mass_share;
      d["priority_sum"] = s.priority_sum;
      d["passed_over"] = s.passed_over;
      d["dropped"] = s.dropped;
      d["away"] = s.away;
      d["policy_lag_mean"] =
          s.policy_lag_mean.has_value() ? py::cast(*s.policy_lag_mean) : py::none();
      d["inserts_per_s"] = s.inserts_per_s.has_value() ? py::cast(*s.inserts_per_s) : py::none();
      out.append(d);
    }
    return out;
  }

  double TvDistance() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu_);
    return learner::SamplingTvDistance(io_->source()->shares());
  }

  const protocol::LayoutConfig& config() const { return config_; }

 private:
  MultiNodeLearner() = default;

  std::mutex mu_;
  std::unique_ptr<verbs::Provider> provider_;
  protocol::LayoutConfig config_;
  rl::ObservationType type_ = rl::ObservationType::kFloat32;
  std::unique_ptr<learner::MultiNodeIo> io_;  // destroyed before provider_
  std::unique_ptr<rl::TransitionBatch> batch_;
  std::vector<float> weights_;
  std::vector<learner::EntryOrigin> origins_;
};

void RegisterMultiNode(py::module_& m) {
  py::class_<MultiConnectArgs>(m, "MultiConnectArgs")
      .def(py::init<>())
      .def_readwrite("servers", &MultiConnectArgs::servers)
      .def_readwrite("links", &MultiConnectArgs::links)
      .def_readwrite("link", &MultiConnectArgs::link)
      .def_readwrite("token", &MultiConnectArgs::token)
      .def_readwrite("token_file", &MultiConnectArgs::token_file)
      .def_readwrite("provider", &MultiConnectArgs::provider)
      .def_readwrite("insecure", &MultiConnectArgs::insecure)
      .def_readwrite("connect_timeout_s", &MultiConnectArgs::connect_timeout_s)
      .def_readwrite("learner_cache", &MultiConnectArgs::learner_cache)
      .def_readwrite("shard_policy", &MultiConnectArgs::shard_policy)
      .def_readwrite("node_timeout_s", &MultiConnectArgs::node_timeout_s)
      .def_readwrite("node_start_timeout_s", &MultiConnectArgs::node_start_timeout_s)
      .def_readwrite("seed", &MultiConnectArgs::seed);
  py::class_<MultiNodeLearner, std::shared_ptr<MultiNodeLearner>>(m, "MultiNodeLearner")
      .def("next", &MultiNodeLearner::Next, py::arg("timeout_s") = 30.0)
      .def("write_priorities", &MultiNodeLearner::WritePriorities, py::arg("priorities"))
      .def("publish", &MultiNodeLearner::Publish, py::arg("data"))
      .def("nodes", &MultiNodeLearner::Nodes)
      .def("tv_distance", &MultiNodeLearner::TvDistance)
      .def_property_readonly("batch_size",
                             [](const MultiNodeLearner& l) { return l.config().batch_size; })
      .def_property_readonly("observation_size",
                             [](const MultiNodeLearner& l) { return l.config().observation_size; })
      .def_property_readonly("num_actions",
                             [](const MultiNodeLearner& l) { return l.config().num_actions; })
      .def_property_readonly("transition_spec",
                             [](const MultiNodeLearner& l) { return l.config().spec(); });
  m.def(
      "_connect_nodes",
      [](const MultiConnectArgs& args) {
        absl::StatusOr<std::unique_ptr<MultiNodeLearner>> learner;
        {
          py::gil_scoped_release release;
          learner = MultiNodeLearner::Connect(args);
        }
        return std::shared_ptr<MultiNodeLearner>(ValueOrThrow(std::move(learner)));
      },
      py::arg("args"));
}

}  // namespace dreplay::python
