// Copyright dreplay authors.
//
// peer_bench_redis.h: the Redis arm of tools/bench/peer_bench. The tool starts a
// redis-server (peer_bench_redis_server.h) and drives it with hiredis, with
// pipelined, batched commands:
//
//   writers  each owns a ring of chunk keys, a chunk holding one insert:
//            c.insert_batch transitions back to back, as Reverb groups
//            steps into chunks (and one large value is what Redis reads
//            fastest: it reads a bulk argument of 32 KiB or more in one go,
//            smaller ones 16 KiB per event-loop turn). One insert is two
//            commands sent back to back: SET of the writer's next chunk
//            (overwriting its oldest, so the ring evicts FIFO) and RPUSH of
//            one 20-byte record per transition (writer, slot, sequence,
//            initial priority) to the list "peer:new". Two inserts are kept
//            in flight; the RPUSH reply (the list's length) holds a writer
//            back while the learner is more than 8 MiB of transitions behind.
//   learner  keeps the priorities, as open-source Ape-X learners keep their
//            replay memory: a replay::ReplayMemory over the transition
//            slots of every writer's ring. Each round sends, in one
//            pipeline, MULTI / LRANGE / LTRIM / EXEC (takes up to 4096 new
//            records and inserts them into the memory) and one GETRANGE per
//            transition of the batch of c.batch_size it sampled by priority;
//            two rounds are in flight. When a batch's payloads arrive it
//            copies them into its batch buffer, draws a new priority per
//            transition and writes it into its memory (priorities never go
//            to Redis: they live where they are sampled).
//
// So every transition crosses Redis once on the way in, and every sampled
// transition once on the way out, as in the other arms; Redis holds the
// payloads and the learner the priority index (a sorted set cannot sample
// in proportion to priority). Two other designs were measured side by side
// on a loaded 2-core host and left: one key per transition with MSET / MGET
// (inserts 2 to 4 times slower at 128 B to 4 KiB), and a batch's ranges
// fetched by one Lua script (sampling several times slower). "Inserted"
// counts records the learner put into its memory, "sampled" the payloads it
// received.
//
// Blocking; owns the child process and its client threads, and joins and
// stops them before it returns.

#ifndef DREPLAY_TOOLS_BENCH_PEER_BENCH_REDIS_H_
#define DREPLAY_TOOLS_BENCH_PEER_BENCH_REDIS_H_

#include <string>

#include "absl/status/statusor.h"
#include "tools/bench/peer_bench_config.h"

namespace dreplay::tools {

// One run of the Redis arm. The prefill goes through Redis before the clock
// starts. NotFound when `redis_server` is missing; the first failure of the
// server or a client (named) otherwise.
absl::StatusOr<PeerCaseResult> RunRedisArm(const PeerCase& c, const std::string& redis_server);

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_PEER_BENCH_REDIS_H_
