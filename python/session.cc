// Copyright dreplay authors.

#include "python/session.h"

#include "protocol/auth.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/connection_flags.h"
#include "common/status_macros.h"
#include "protocol/handshake.h"
#include "protocol/transition_spec.h"
#include "python/status_error.h"

namespace dreplay::python {
namespace py = pybind11;

absl::StatusOr<std::shared_ptr<Session>> Session::Connect(const ConnectArgs& args) {
  ASSIGN_OR_RETURN(protocol::Role role, protocol::ParseRole(args.role));
  if (!(args.connect_timeout_s >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("connect_timeout_s=", args.connect_timeout_s, ": must be >= 0"));
  }
  client::ConnectionFlags flags;
  flags.server = args.server;
  flags.provider.provider = args.provider;
  flags.link = args.link;
  flags.auth_token = args.token;
  flags.auth_token_file = args.token_file;
  flags.insecure = args.insecure;
  ASSIGN_OR_RETURN(client::ConnectionOptions options,
                   client::ConnectionOptionsFromFlags(flags, role, args.actor_id));
  options.session.connect_deadline = absl::Seconds(args.connect_timeout_s);
  options.session.learner_cache = args.learner_cache;
  options.session.learner_placement = args.learner_placement;
  std::shared_ptr<Session> session(new Session());
  ASSIGN_OR_RETURN(session->provider_, verbs::CreateProvider(options.provider));
  ASSIGN_OR_RETURN(session->session_,
                   client::ClientSession::Connect(session->provider_.get(), options.session));
  return session;
}

Session::~Session() {
  // The session's queue pair goes before the provider that made it.
  session_.reset();
  provider_.reset();
}

namespace {

py::dict ConfigDict(const protocol::LayoutConfig& c) {
  py::dict d;
  d["capacity"] = c.capacity;
  d["param_bytes"] = c.param_bytes;
  d["slot_size"] = c.slot_size;
  d["max_payload"] = c.max_payload();
  d["batch_size"] = c.batch_size;
  d["staging_depth"] = c.staging_depth;
  d["observation_size"] = c.observation_size;
  d["num_actions"] = c.num_actions;
  d["max_actors"] = c.max_actors;
  d["transition_spec"] = c.spec();
  d["actor_window"] = c.actor_window;
  d["frame_stack"] = c.frame_stack;  // frames stored once: dreplay.FrameCache
  return d;
}

py::dict LinkBytesDict(const client::LinkBytes& b) {
  py::dict d;
  d["experience"] = b.experience;
  d["metadata"] = b.metadata;
  d["polling"] = b.polling;
  d["priorities"] = b.priorities;
  d["params"] = b.params;
  d["control"] = b.control;
  d["total"] = b.total();
  return d;
}

}  // namespace

protocol::ObservationType ObservationTypeOf(const protocol::LayoutConfig& config) {
  absl::StatusOr<protocol::TransitionSpec> spec = protocol::TransitionSpec::Parse(config.spec());
  return spec.ok() ? spec->observation_type : protocol::ObservationType::kFloat32;
}

void RegisterSession(py::module_& m) {
  py::class_<Session, std::shared_ptr<Session>>(m, "Session",
                                                "A connection to a replay server (see connect()).")
      .def_property_readonly(
          "config",
          [](Session& s) {
            protocol::LayoutConfig config;
            {
              SessionCall call(s);
              config = s.client().config();
            }
            return ConfigDict(config);
          },
          "The server's published configuration, as a dict.")
      .def_property_readonly(
          "epoch",
          [](Session& s) {
            SessionCall call(s);
            return s.client().epoch();
          },
          "The server's epoch as last READ.")
      .def_property_readonly(
          "generation",
          [](Session& s) {
            SessionCall call(s);
            return s.client().generation();
          },
          "1 for the first connection, +1 for every reconnection.")
      .def(
          "link_bytes",
          [](Session& s) {
            client::LinkBytes bytes;
            {
              SessionCall call(s);
              bytes = s.client().link_bytes();
            }
            return LinkBytesDict(bytes);
          },
          "Bytes this session moved across its link, by traffic class.");

  m.def(
      "parse_transition_spec",
      [](const std::string& text) {
        protocol::TransitionSpec spec = ValueOrThrow(protocol::TransitionSpec::Parse(text));
        py::dict d;
        d["env"] = spec.env;
        d["observation_size"] = spec.observation_size;
        d["action_count"] = spec.action_count;
        d["n_step"] = spec.n_step;
        d["gamma"] = spec.gamma;
        d["observation_type"] = protocol::ObservationTypeName(spec.observation_type);
        return d;
      },
      py::arg("text"), "A server's transition_spec (protocol/transition_spec.h) as a dict.");

  m.def(
      "actor_credential",
      [](const std::string& master_token, uint32_t actor_id) {
        return protocol::ActorCredential(master_token, actor_id);
      },
      py::arg("master_token"), py::arg("actor_id"),
      "The credential actor `actor_id` proves to a server whose actors' token is "
      "`master_token` (protocol::ActorCredential): hand each actor only its own.");

  m.def(
      "_connect",
      [](const ConnectArgs& args) {
        absl::StatusOr<std::shared_ptr<Session>> session;
        {
          py::gil_scoped_release release;
          session = Session::Connect(args);
        }
        return ValueOrThrow(std::move(session));
      },
      py::arg("args"));

  py::class_<ConnectArgs>(m, "ConnectArgs")
      .def(py::init<>())
      .def_readwrite("server", &ConnectArgs::server)
      .def_readwrite("role", &ConnectArgs::role)
      .def_readwrite("token", &ConnectArgs::token)
      .def_readwrite("token_file", &ConnectArgs::token_file)
      .def_readwrite("provider", &ConnectArgs::provider)
      .def_readwrite("link", &ConnectArgs::link)
      .def_readwrite("actor_id", &ConnectArgs::actor_id)
      .def_readwrite("connect_timeout_s", &ConnectArgs::connect_timeout_s)
      .def_readwrite("learner_cache", &ConnectArgs::learner_cache)
      .def_readwrite("learner_placement", &ConnectArgs::learner_placement)
      .def_readwrite("insecure", &ConnectArgs::insecure);
}

}  // namespace dreplay::python
