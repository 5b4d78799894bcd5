// Copyright dreplay authors.
//
// session.h: a connection to a replay server as the Python package holds it:
// the provider, the client session, and the lock that the session's clients
// (writer, reader, ...) take around every call.
//
// The C++ session and its clients are not thread-safe; Python threads may
// share them. Every bound call that touches the session first releases the
// GIL and then takes `mutex` (in that order, and the lock is dropped before
// the GIL is taken back, so a thread holding the lock never waits for the
// GIL): calls on one session run one at a time, while other Python threads
// run.
//
//   std::shared_ptr<Session> s = Session::Connect(args);  // GIL released
//   SessionCall call(*s);          // no GIL, session locked
//   s->client().config();
//
// Ownership: clients hold a shared_ptr to their Session, so it is destroyed
// (and disconnected) after the last of them.

#ifndef DREPLAY_PYTHON_SESSION_H_
#define DREPLAY_PYTHON_SESSION_H_

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "client/session.h"
#include "protocol/layout.h"
#include "protocol/transition_encoding.h"
#include "pybind11/pybind11.h"
#include "python/status_error.h"
#include "verbs/verbs.h"

namespace dreplay::python {

// What dreplay.connect() takes.
struct ConnectArgs {
  std::string server;  // HOST:PORT
  std::string role = "learner";
  std::string token;
  std::string token_file;
  std::string provider = "auto";
  std::string link = "none";
  uint32_t actor_id = 0;
  double connect_timeout_s = 10;
  bool learner_cache = false;
  // A learner of the learner placement: keys to the slots, commit words
  // and forward journal (ClientSessionOptions::learner_placement).
  bool learner_placement = false;
  bool insecure = false;  // no token: a server started with --insecure
};

class Session {
 public:
  // Connects (blocking; call without the GIL). Errors as
  // client::ConnectionOptionsFromFlags and client::ClientSession::Connect.
  static absl::StatusOr<std::shared_ptr<Session>> Connect(const ConnectArgs& args);
  ~Session();

  client::ClientSession& client() { return *session_; }
  std::mutex& mutex() { return mutex_; }

 private:
  Session() = default;
  std::unique_ptr<verbs::Provider> provider_;
  std::unique_ptr<client::ClientSession> session_;  // destroyed before provider_
  std::mutex mutex_;
};

// Releases the GIL, then locks the session, for the scope of a call.
class SessionCall {
 public:
  explicit SessionCall(Session& session) : lock_(session.mutex()) {}

 private:
  pybind11::gil_scoped_release release_;  // constructed first, released last
  std::lock_guard<std::mutex> lock_;
};

// Runs `create` (a client's Create, returning StatusOr) under the session's
// lock without the GIL, as SessionCall does, and returns its value or throws
// its status (status_error.h).
template <typename Create>
auto CreateUnderLock(Session& session, Create create) {
  decltype(create()) made;
  {
    SessionCall call(session);
    made = create();
  }
  return ValueOrThrow(std::move(made));
}

// The observation type of the transitions `config`'s transition spec
// describes: f32 when the server publishes no spec (or one that does not
// parse; the clients' own checks report that).
protocol::ObservationType ObservationTypeOf(const protocol::LayoutConfig& config);

// Binds dreplay._dreplay.Session and connect().
void RegisterSession(pybind11::module_& m);

}  // namespace dreplay::python

#endif  // DREPLAY_PYTHON_SESSION_H_
