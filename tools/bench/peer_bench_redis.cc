// Copyright dreplay authors.

#include "tools/bench/peer_bench_redis.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "replay/replay_memory.h"
#include "tools/bench/peer_bench_redis_server.h"
#include "tools/bench/peer_bench_window.h"

namespace dreplay::tools {
namespace {

constexpr char kNewList[] = "peer:new";
constexpr int kWriterDepth = 2;                    // inserts in flight per writer
constexpr int kLearnerDepth = 2;                   // rounds in flight
constexpr uint64_t kMaxBacklogBytes = 8ull << 20;  // transitions the learner may lag
constexpr uint64_t kMaxPullRecords = 4096;         // records per LRANGE
constexpr absl::Duration kPrefillTimeout = absl::Seconds(60);
constexpr double kBeta = 0.4;

// One new transition, as the learner learns of it.
struct Record {
  uint32_t writer = 0;
  uint32_t slot = 0;
  uint64_t sequence = 0;
  float priority = 0;
};
constexpr size_t kRecordBytes = 20;

void Encode(const Record& r, char* out) {
  std::memcpy(out, &r.writer, 4);
  std::memcpy(out + 4, &r.slot, 4);
  std::memcpy(out + 8, &r.sequence, 8);
  std::memcpy(out + 16, &r.priority, 4);
}

Record Decode(const char* in) {
  Record r;
  std::memcpy(&r.writer, in, 4);
  std::memcpy(&r.slot, in + 4, 4);
  std::memcpy(&r.sequence, in + 8, 8);
  std::memcpy(&r.priority, in + 16, 4);
  return r;
}

struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextFree>;
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

absl::StatusOr<Context> Connect(int port) {
  timeval tv{10, 0};
  Context c(redisConnectWithTimeout("127.0.0.1", port, tv));
  if (c == nullptr) return absl::ResourceExhaustedError("hiredis: cannot allocate a context");
  if (c->err != 0) return absl::UnavailableError(absl::StrCat("connect: ", c->errstr));
  return c;
}

absl::StatusOr<Reply> GetReply(redisContext* c) {
  void* r = nullptr;
  if (redisGetReply(c, &r) != REDIS_OK || r == nullptr) {
    return absl::UnavailableError(absl::StrCat("redis: ", c->errstr));
  }
  Reply reply(static_cast<redisReply*>(r));
  if (reply->type == REDIS_REPLY_ERROR) {
    return absl::InternalError(absl::StrCat("redis: ", std::string(reply->str, reply->len)));
  }
  return reply;
}

// Where transitions live: writer w owns `chunks` chunk keys, each holding
// one insert (c.insert_batch transitions, back to back). Transition slot s
// of writer w is byte (s % insert_batch) * payload of chunk s / insert_batch;
// its index in the learner's memory is w * ring + s.
struct ChunkRing {
  uint64_t chunks = 0;  // per writer
  uint64_t ring = 0;    // transition slots per writer
  uint32_t batch = 0;
  uint32_t payload = 0;
  std::vector<std::string> keys;  // writer w's chunk k: keys[w * chunks + k]

  explicit ChunkRing(const PeerCase& c)
      : chunks(
            std::max<uint64_t>(c.capacity / static_cast<uint64_t>(c.writers) / c.insert_batch, 1)),
        ring(chunks * c.insert_batch),
        batch(c.insert_batch),
        payload(c.payload_bytes) {
    for (int w = 0; w < c.writers; ++w) {
      for (uint64_t k = 0; k < chunks; ++k) keys.push_back(absl::StrCat("peer:", w, ":", k));
    }
  }
  uint64_t index(uint32_t writer, uint64_t slot) const { return writer * ring + slot; }
  const std::string& key_of(uint64_t index) const {
    return keys[(index / ring) * chunks + (index % ring) / batch];
  }
  uint64_t offset_of(uint64_t index) const { return (index % ring) % batch * uint64_t{payload}; }
};

// A writer's inserts: SET of the chunk, then RPUSH of the records, pipelined.
class RedisWriter {
 public:
  RedisWriter(const PeerCase& c, const ChunkRing& ring, uint32_t id, redisContext* ctx)
      : c_(c),
        ring_(ring),
        id_(id),
        ctx_(ctx),
        chunk_(uint64_t{c.insert_batch} * c.payload_bytes, static_cast<char>('a' + id)),
        records_(uint64_t{c.insert_batch} * kRecordBytes, '\0'),
        max_backlog_(std::max<uint64_t>(2ull * c.writers * c.insert_batch,
                                        kMaxBacklogBytes / c.payload_bytes)) {}

  // Sends one insert; waits for the oldest when kWriterDepth are in flight.
  absl::Status Insert(PeerArmState* state) {
    std::vector<const char*> rpush = {"RPUSH", kNewList};
    std::vector<size_t> rpush_len = {5, sizeof(kNewList) - 1};
    const uint64_t chunk = (sequence_ / c_.insert_batch) % ring_.chunks;
    for (uint32_t i = 0; i < c_.insert_batch; ++i, ++sequence_) {
      std::memcpy(chunk_.data() + uint64_t{i} * c_.payload_bytes, &sequence_, sizeof(sequence_));
      const uint64_t slot = chunk * c_.insert_batch + i;
      Encode({id_, static_cast<uint32_t>(slot), sequence_,
              0.1f * static_cast<float>(sequence_ % 17 + 1)},
             records_.data() + uint64_t{i} * kRecordBytes);
      rpush.push_back(records_.data() + uint64_t{i} * kRecordBytes);
      rpush_len.push_back(kRecordBytes);
    }
    const std::string& key = ring_.keys[id_ * ring_.chunks + chunk];
    const char* set[] = {"SET", key.data(), chunk_.data()};
    const size_t set_len[] = {3, key.size(), chunk_.size()};
    redisAppendCommandArgv(ctx_, 3, set, set_len);
    redisAppendCommandArgv(ctx_, static_cast<int>(rpush.size()), rpush.data(), rpush_len.data());
    if (++in_flight_ < kWriterDepth) return absl::OkStatus();
    return Complete(state);
  }

  // Waits for every insert in flight.
  absl::Status Drain(PeerArmState* state) {
    while (in_flight_ > 0) RETURN_IF_ERROR(Complete(state));
    return absl::OkStatus();
  }

 private:
  // The oldest insert's two replies; then, while the learner lags by more
  // than max_backlog_ records, waits.
  absl::Status Complete(PeerArmState* state) {
    ASSIGN_OR_RETURN(Reply set, GetReply(ctx_));
    ASSIGN_OR_RETURN(Reply rpush, GetReply(ctx_));
    --in_flight_;
    uint64_t backlog = static_cast<uint64_t>(rpush->integer);
    while (backlog > max_backlog_ && !state->stop) {
      absl::SleepFor(absl::Microseconds(100));
      RETURN_IF_ERROR(Drain(state));
      Reply len(static_cast<redisReply*>(redisCommand(ctx_, "LLEN %s", kNewList)));
      if (len == nullptr) return absl::UnavailableError(absl::StrCat("redis: ", ctx_->errstr));
      backlog = static_cast<uint64_t>(len->integer);
    }
    return absl::OkStatus();
  }

  const PeerCase& c_;
  const ChunkRing& ring_;
  const uint32_t id_;
  redisContext* const ctx_;
  std::string chunk_;
  std::string records_;
  const uint64_t max_backlog_;
  uint64_t sequence_ = 0;
  int in_flight_ = 0;
};

absl::Status RunWriter(const PeerCase& c, const ChunkRing& ring, int port, uint32_t id,
                       PeerArmState* state) {
  ASSIGN_OR_RETURN(Context ctx, Connect(port));
  RedisWriter writer(c, ring, id, ctx.get());
  // This writer's share of the prefill, before the clock starts.
  const uint64_t share = (c.prefill + c.writers - 1) / c.writers;
  for (uint64_t n = 0; n < share; n += c.insert_batch) RETURN_IF_ERROR(writer.Insert(state));
  RETURN_IF_ERROR(writer.Drain(state));
  ++state->ready;
  while (!state->stop) RETURN_IF_ERROR(writer.Insert(state));
  return writer.Drain(state);
}

// The learner: its priority index, the pulls and the sampled fetches.
class RedisLearner {
 public:
  RedisLearner(const PeerCase& c, const ChunkRing& ring, redisContext* ctx,
               std::unique_ptr<replay::ReplayMemory> memory)
      : c_(c),
        ring_(ring),
        ctx_(ctx),
        memory_(std::move(memory)),
        rng_(c.seed),
        batch_(uint64_t{c.batch_size} * c.payload_bytes),
        run_(memory_.get(), kMaxPullRecords) {}

  // Pulls (no sampling) until the memory holds `n` transitions.
  absl::Status PullUntil(uint64_t n, PeerArmState* state) {
    const absl::Time deadline = absl::Now() + kPrefillTimeout;
    while (memory_->size() < n && !state->stop) {
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat("prefill: ", memory_->size(), " of ", n));
      }
      AppendPull();
      RETURN_IF_ERROR(ReadPull(state));
    }
    return absl::OkStatus();
  }

  // Keeps kLearnerDepth rounds in flight: samples and sends a round, then
  // completes the oldest.
  absl::Status Round(PeerArmState* state) {
    AppendPull();
    std::vector<replay::SampledItem>& items = in_flight_.emplace_back(c_.batch_size);
    const int n = memory_->SampleBatch(c_.batch_size, kBeta, absl::MakeSpan(items));
    items.resize(static_cast<size_t>(n));
    for (const replay::SampledItem& item : items) {
      const std::string& key = ring_.key_of(item.index);
      const std::string from = std::to_string(ring_.offset_of(item.index));
      const std::string to = std::to_string(ring_.offset_of(item.index) + c_.payload_bytes - 1);
      const char* argv[] = {"GETRANGE", key.data(), from.data(), to.data()};
      const size_t lens[] = {8, key.size(), from.size(), to.size()};
      redisAppendCommandArgv(ctx_, 4, argv, lens);
    }
    int done = 0;
    while (!done) {
      if (redisBufferWrite(ctx_, &done) != REDIS_OK) {
        return absl::UnavailableError(absl::StrCat("redis: ", ctx_->errstr));
      }
    }
    if (static_cast<int>(in_flight_.size()) < kLearnerDepth) return absl::OkStatus();
    return Complete(state);
  }

  absl::Status Drain(PeerArmState* state) {
    while (!in_flight_.empty()) RETURN_IF_ERROR(Complete(state));
    return absl::OkStatus();
  }

 private:
  void AppendPull() {
    redisAppendCommand(ctx_, "MULTI");
    redisAppendCommand(ctx_, "LRANGE %s 0 %d", kNewList, static_cast<int>(kMaxPullRecords - 1));
    redisAppendCommand(ctx_, "LTRIM %s %d -1", kNewList, static_cast<int>(kMaxPullRecords));
    redisAppendCommand(ctx_, "EXEC");
  }

  // The pull's four replies: the new records go into the memory.
  absl::Status ReadPull(PeerArmState* state) {
    for (int i = 0; i < 3; ++i) RETURN_IF_ERROR(GetReply(ctx_).status());
    ASSIGN_OR_RETURN(Reply exec, GetReply(ctx_));
    if (exec->type != REDIS_REPLY_ARRAY || exec->elements != 2 ||
        exec->element[0]->type != REDIS_REPLY_ARRAY) {
      return absl::InternalError("redis: unexpected EXEC reply");
    }
    const redisReply* records = exec->element[0];
    for (size_t i = 0; i < records->elements; ++i) {
      const redisReply* e = records->element[i];
      if (e->type != REDIS_REPLY_STRING || e->len != kRecordBytes) {
        return absl::InternalError("redis: malformed record");
      }
      const Record r = Decode(e->str);
      run_.Add(ring_.index(r.writer, r.slot), r.sequence, r.priority);
    }
    run_.Flush();
    state->inserted += records->elements;
    return absl::OkStatus();
  }

  // The oldest round: its pull, then its batch (payloads copied into the
  // batch buffer, new priorities written into the memory).
  absl::Status Complete(PeerArmState* state) {
    RETURN_IF_ERROR(ReadPull(state));
    std::vector<replay::SampledItem> items = std::move(in_flight_.front());
    in_flight_.pop_front();
    if (items.empty()) return absl::OkStatus();
    uint64_t received = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      ASSIGN_OR_RETURN(Reply e, GetReply(ctx_));
      if (e->type != REDIS_REPLY_STRING || e->len != c_.payload_bytes) continue;
      std::memcpy(batch_.data() + i * c_.payload_bytes, e->str, e->len);
      ++received;
      memory_->UpdatePriority(items[i].index, items[i].sequence, new_priority_(rng_));
    }
    state->sampled += received;
    return absl::OkStatus();
  }

  const PeerCase& c_;
  const ChunkRing& ring_;
  redisContext* const ctx_;
  std::unique_ptr<replay::ReplayMemory> memory_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<float> new_priority_{0.05f, 2.0f};
  std::vector<char> batch_;
  std::deque<std::vector<replay::SampledItem>> in_flight_;
  // A writer's records arrive in runs of consecutive slots and sequences:
  // each run enters the memory in one InsertRun, as dreplay's ingest does.
  replay::InsertRunBuffer run_;
};

absl::Status RunLearner(const PeerCase& c, const ChunkRing& ring, int port, PeerArmState* state) {
  replay::ReplayMemoryOptions mo;
  mo.capacity = c.capacity;
  mo.alpha = c.alpha;
  mo.seed = c.seed;
  ASSIGN_OR_RETURN(std::unique_ptr<replay::ReplayMemory> memory, replay::ReplayMemory::Create(mo));
  ASSIGN_OR_RETURN(Context ctx, Connect(port));
  RedisLearner learner(c, ring, ctx.get(), std::move(memory));
  RETURN_IF_ERROR(learner.PullUntil(std::max<uint64_t>(c.prefill, 1), state));
  ++state->ready;
  while (!state->stop) RETURN_IF_ERROR(learner.Round(state));
  return learner.Drain(state);
}

}  // namespace

absl::StatusOr<PeerCaseResult> RunRedisArm(const PeerCase& c, const std::string& redis_server) {
  ASSIGN_OR_RETURN(std::unique_ptr<RedisServerProcess> redis,
                   RedisServerProcess::Start(redis_server));
  const int port = redis->port();
  const ChunkRing ring(c);
  std::vector<PeerClient> clients;
  for (int w = 0; w < c.writers; ++w) {
    clients.push_back({absl::StrCat("redis writer ", w), [&, w](PeerArmState* s) {
                         return RunWriter(c, ring, port, static_cast<uint32_t>(w), s);
                       }});
  }
  clients.push_back(
      {"redis learner", [&](PeerArmState* s) { return RunLearner(c, ring, port, s); }});
  PeerArmState state;
  RedisServerProcess* server = redis.get();
  absl::StatusOr<PeerCaseResult> r = RunPeerClients(
      c, PeerSystem::kRedis, clients,
      [server] { return ProcessCpuSeconds() + server->CpuSeconds(); }, &state);
  const absl::Status stopped = redis->Stop();
  RETURN_IF_ERROR(r.status());
  RETURN_IF_ERROR(stopped);
  return r;
}

}  // namespace dreplay::tools
