// Copyright dreplay authors.
//
// peer_bench_grpc.h: the gRPC arm of tools/bench/peer_bench, in the style of a
// Reverb server: a gRPC server (libgrpc++, synchronous API, in this process
// on a loopback port the OS picks) holds a prioritized replay memory
// (replay::ReplayMemory over a ring of `capacity` payloads) behind the
// streaming service of tools/bench/peer_bench.proto.
//
//   writers  one channel (its own TCP connection) and one Insert stream
//            each; a message carries c.insert_batch transitions, the server
//            inserts them under its lock and confirms; two messages are kept
//            in flight.
//   reader   one channel and one Sample stream; each request carries the new
//            priorities of one earlier batch (a random draw per transition)
//            and asks for c.batch_size transitions; the server applies the
//            updates, samples by priority and answers with the batch's
//            payloads; four requests are kept in flight.
//
// The server keeps each payload as the string it parsed from the request
// (no copy on insert) and copies sampled payloads into the response outside
// its lock (they are held by reference), as Reverb holds chunks. "Inserted"
// counts transitions the server put into its memory, "sampled" the
// transitions the reader received. The prefill goes through the writers'
// streams before the clock starts.
//
// Blocking; owns the server and the client threads and stops and joins them
// before it returns.

#ifndef DREPLAY_TOOLS_BENCH_PEER_BENCH_GRPC_H_
#define DREPLAY_TOOLS_BENCH_PEER_BENCH_GRPC_H_

#include "absl/status/statusor.h"
#include "tools/bench/peer_bench_config.h"

namespace dreplay::tools {

// One run of the gRPC arm. The first failure of the server or a client
// (named).
absl::StatusOr<PeerCaseResult> RunGrpcArm(const PeerCase& c);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_PEER_BENCH_GRPC_H_
