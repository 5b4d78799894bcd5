// Copyright dreplay authors.
//
// delays.h: the replay core's delay histograms, for monitoring.
//
// Written by the replay core's thread (Ingest, ReplayCore), read by any
// thread (the metrics endpoint) through BucketHistogram::Snapshot(). Not
// checkpointed: they start empty in every process.

#ifndef DREPLAY_REPLAY_SERVER_DELAYS_H_
#define DREPLAY_REPLAY_SERVER_DELAYS_H_

#include "common/bucket_histogram.h"

namespace dreplay::server {

struct ReplayDelays {
  // Seconds from an actor sealing a slot (SlotHeader::insert_time_ns, the
  // actor's wall clock) to ingest inserting it (the server's wall clock,
  // Clock::WallNow). Across hosts as good as their clock synchronisation; a
  // negative delay (skew) counts as 0. Slots without an insert time (0) are
  // not counted.
  BucketHistogram insert_to_ingest{BucketHistogram::DelayBoundsSeconds()};
  // Seconds a staged batch held its staging slot: from being staged to its
  // priority update being consumed (the learner's READ, training step and
  // update WRITE, plus the core's polling). Batches released by
  // update_timeout or dropped for a new learner are not counted.
  BucketHistogram staging{BucketHistogram::DelayBoundsSeconds()};
};

}  // namespace dreplay::server

#endif  // DREPLAY_REPLAY_SERVER_DELAYS_H_
