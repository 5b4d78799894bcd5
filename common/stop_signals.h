// Copyright dreplay authors.
//
// stop_signals.h: SIGINT and SIGTERM as a request to stop, for a binary's
// main().
//
//   StopSignals signals;                       // handlers installed
//   RETURN_IF_ERROR(loop->Run(signals.flag())); // the loop polls the flag
//
//   StopSignals signals(StopSignals::Mode::kBlockAndWait);  // before threads
//   ASSIGN_OR_RETURN(auto server, ReplayServer::Start(...));
//   signals.Wait();                            // until SIGINT or SIGTERM
//
//   StopSignals signals(StopSignals::Mode::kBlockAndWait);
//   while (signals.WaitForEvent(absl::InfiniteDuration()) == StopSignals::Event::kRequest) {
//     server->RequestCheckpoint();                // SIGUSR1
//   }
//
// A StopSignals takes over both signals for its lifetime and gives them back
// (the previous actions and signal mask) when destroyed. In kBlockAndWait
// mode it also takes SIGUSR1, as a request (for work on demand, e.g. a
// checkpoint) that does not stop the process. One exists at a
// time in a process (CHECK-enforced); its state is process-wide because a
// signal handler can reach nothing else.
//
// Thread safety: flag(), requested(), signal_number() and RequestStop() may
// be called from any thread; WaitFor()/Wait() from one thread at a time.

#ifndef DREPLAY_COMMON_STOP_SIGNALS_H_
#define DREPLAY_COMMON_STOP_SIGNALS_H_

#include <signal.h>

#include <atomic>

#include "absl/time/time.h"

namespace dreplay {

class StopSignals {
 public:
  enum class Mode {
    // A handler sets the flag on whichever thread the signal lands. The
    // handler is installed for one signal only: a second SIGINT or SIGTERM
    // takes the default action and ends a process that is slow to stop.
    kFlagThenDefault,
    // The signals are blocked in the constructing thread, and so in every
    // thread it starts afterwards (construct before starting any); only
    // WaitFor()/Wait() take them. Signals that come after the first stay
    // blocked and are discarded, so a stopping process finishes its work
    // (a server its final checkpoint). SIGUSR1 is blocked too, so that it
    // never ends the process; WaitForEvent() takes it as a request.
    kBlockAndWait,
  };
  // What WaitForEvent() returns.
  enum class Event {
    kStop,     // a stop was requested (requested() is true)
    kRequest,  // SIGUSR1 arrived (kBlockAndWait only)
    kTimeout,
  };

  explicit StopSignals(Mode mode = Mode::kFlagThenDefault);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // True once a stop was requested; for loops that poll (ActorLoop::Run).
  // The same object for the StopSignals' life.
  const std::atomic<bool>& flag() const;
  bool requested() const { return flag().load(); }
  // The signal that requested the stop; 0 before, or after RequestStop().
  int signal_number() const;

  // Requests a stop as a signal would (tests, or a binary's own reasons).
  void RequestStop();

  // Blocks until a stop is requested or `timeout` passes; returns
  // requested(). Returns at once when a stop was requested already.
  bool WaitFor(absl::Duration timeout);
  void Wait() { WaitFor(absl::InfiniteDuration()); }
  // Like WaitFor(), but in kBlockAndWait mode also returns kRequest for each
  // SIGUSR1 (several sent before it is called may count once). Returns
  // kStop at once when a stop was requested already. In kFlagThenDefault
  // mode it never returns kRequest.
  Event WaitForEvent(absl::Duration timeout);

 private:
  // WaitFor() and WaitForEvent(); SIGUSR1 is taken only with take_requests.
  Event WaitUntil(absl::Duration timeout, bool take_requests);

  const Mode mode_;
  struct sigaction old_int_ = {};
  struct sigaction old_term_ = {};
  struct sigaction old_usr1_ = {};
  sigset_t old_mask_ = {};
};

}  // namespace dreplay

#endif  // DREPLAY_COMMON_STOP_SIGNALS_H_
