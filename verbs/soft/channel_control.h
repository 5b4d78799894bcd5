// Copyright dreplay authors.
//
// channel_control.h: what the requester and the responder of a soft queue
// pair (requester.h, responder.h) may ask of the Channel that owns them
// (channel.h): whether the queue pair still works, and to end it.
//
// Called only from inside their methods, with the channel's lock held.

#ifndef DREPLAY_VERBS_SOFT_CHANNEL_CONTROL_H_
#define DREPLAY_VERBS_SOFT_CHANNEL_CONTROL_H_

#include <string>

#include "verbs/verbs.h"

namespace dreplay::verbs::soft {

class ChannelControl {
 public:
  // False once the queue pair is in the error state.
  virtual bool ready() const = 0;
  // Moves the queue pair to the error state: the first outstanding request
  // completes with `first` (kFlushed: all of them are flushed), the others
  // and every posted receive with kFlushed. The responses already queued
  // are sent, then the connection is closed.
  virtual void Fail(WcStatus first, const std::string& reason) = 0;
  // The peer broke the protocol: it gets a NAK, and the queue pair fails.
  virtual void ProtocolError(const std::string& what) = 0;

 protected:
  ~ChannelControl() = default;
};

}  // namespace dreplay::verbs::soft

#endif  // DREPLAY_VERBS_SOFT_CHANNEL_CONTROL_H_
