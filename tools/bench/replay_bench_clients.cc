// Copyright dreplay authors.

#include "tools/bench/replay_bench_clients.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "actor_client/experience_writer.h"
#include "client/session.h"
#include "common/status_macros.h"
#include "learner_client/priority_writer.h"
#include "protocol/layout.h"

namespace dreplay::tools {
namespace {

using client::ClientSession;
using client::ClientSessionOptions;
using protocol::Role;

// How long the prefill may take to be ingested.
constexpr absl::Duration kSetupTimeout = absl::Seconds(60);
// The learner's Next() returns at least this often to look at the stop flag.
constexpr absl::Duration kNextPoll = absl::Milliseconds(100);
// An actor's wait for room in its lease, per try: it looks at the stop flag
// between tries.
constexpr absl::Duration kRoomWaitSlice = absl::Milliseconds(100);
// Transitions per Flush of the prefill writer.
constexpr uint32_t kPrefillBatch = 256;

ClientSessionOptions SessionOptionsFor(const BenchServer& server, Role role, uint32_t actor_id,
                                       const verbs::LinkModel& link) {
  ClientSessionOptions o;
  o.host = server.host();
  o.port = server.port();
  o.role = role;
  o.actor_id = actor_id;
  o.insecure = true;  // the benchmark's own server (here or a replay_bench --server), no tokens
  o.qp.link = link;
  o.connect_deadline = absl::Seconds(10);
  o.op_timeout = absl::Seconds(30);
  return o;
}

// The learner's session: its link, and the cache flag in the hello.
ClientSessionOptions LearnerSessionOptions(const ReplayBenchConfig& c, const BenchServer& server) {
  ClientSessionOptions o = SessionOptionsFor(server, Role::kLearner, 0, c.link);
  o.learner_cache = c.learner_cache;
  return o;
}

// Fills `payload` for transition `tag`: the tag, then a pattern.
void FillPayload(uint64_t tag, std::vector<uint8_t>* payload) {
  std::memcpy(payload->data(), &tag, std::min(sizeof(tag), payload->size()));
}

// The priority transition `tag` is inserted with.
float InitialPriority(uint64_t tag) { return 0.1f * static_cast<float>(tag % 17 + 1); }

void Publish(const actor::ExperienceWriterStats& s, ClientCounters* counters) {
  counters->transitions.store(s.committed, std::memory_order_relaxed);
  counters->batches.store(s.flushes, std::memory_order_relaxed);
  counters->bytes.store(s.bytes_written, std::memory_order_relaxed);
  counters->reconnects.store(s.reconnects, std::memory_order_relaxed);
}

void Publish(const learner::BatchReaderStats& s, ClientCounters* counters) {
  counters->transitions.store(s.transitions, std::memory_order_relaxed);
  counters->batches.store(s.batches, std::memory_order_relaxed);
  counters->bytes.store(s.bytes_read, std::memory_order_relaxed);
  counters->reconnects.store(s.reconnects, std::memory_order_relaxed);
}

// Latency of one READ of a whole staging slot, alone on the queue pair (the
// reader's pipelined READs have completed by now or complete first).
absl::Status ProbeStagingReads(verbs::Provider* provider, ClientSession* session, int probes,
                               LatencyHistogram* reads) {
  const uint64_t stride = protocol::StagingSlotStride(session->config());
  ASSIGN_OR_RETURN(std::unique_ptr<client::RegisteredBuffer> image,
                   client::RegisteredBuffer::Create(provider, stride));
  for (int i = 0; i < probes; ++i) {
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(session->ReadSync(protocol::RegionKind::kStaging,
                                      protocol::StagingSlotOffset(session->config(), i),
                                      static_cast<uint32_t>(stride), image->mr(), image->data()));
    reads->Record(absl::Now() - start);
  }
  return absl::OkStatus();
}

}  // namespace

void ReplayBenchState::Fail(const absl::Status& s) {
  {
    MutexLock lock(&mu_);
    if (status_.ok()) status_ = s;
  }
  stop = true;
}

absl::Status ReplayBenchState::status() const {
  MutexLock lock(&mu_);
  return status_;
}

void ReplayBenchState::AddInsertLatencies(const LatencyHistogram& latencies) {
  MutexLock lock(&mu_);
  insert_latencies_.Merge(latencies);
}

LatencyHistogram ReplayBenchState::insert_latencies() const {
  MutexLock lock(&mu_);
  return insert_latencies_;
}

void ReplayBenchState::BeginConnect(int limit) {
  MutexLock lock(&mu_);
  while (connecting_ >= std::max(limit, 1)) connect_done_.Wait(&mu_);
  ++connecting_;
}

void ReplayBenchState::EndConnect() {
  MutexLock lock(&mu_);
  --connecting_;
  connect_done_.Signal();
}

absl::Status Prefill(const ReplayBenchConfig& c, const BenchServer& server) {
  if (c.prefill == 0) return absl::OkStatus();
  // A server in another process may have ingested earlier runs' transitions.
  ASSIGN_OR_RETURN(const protocol::StatsBlock before, server.ReadStats());
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Provider> provider, verbs::CreateProvider(c.provider));
  ASSIGN_OR_RETURN(
      std::unique_ptr<ClientSession> session,
      ClientSession::Connect(provider.get(), SessionOptionsFor(server, Role::kActor, 0, {})));
  actor::ExperienceWriterOptions wo;
  wo.max_batch = static_cast<uint32_t>(
      std::min<uint64_t>(kPrefillBatch, protocol::ActorWindow(session->config())));
  ASSIGN_OR_RETURN(std::unique_ptr<actor::ExperienceWriter> writer,
                   actor::ExperienceWriter::Create(session.get(), wo));
  std::vector<uint8_t> payload(c.transition_bytes(), 0x5a);
  for (uint64_t t = 0; t < c.prefill; ++t) {
    FillPayload(t, &payload);
    RETURN_IF_ERROR(writer->Append(payload, InitialPriority(t)));
  }
  RETURN_IF_ERROR(writer->Flush());
  const absl::Time deadline = absl::Now() + kSetupTimeout;
  while (true) {
    ASSIGN_OR_RETURN(const protocol::StatsBlock now, server.ReadStats());
    if (now.inserted >= before.inserted + c.prefill) break;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("the prefill of ", c.prefill,
                                                      " transitions was not ingested within ",
                                                      absl::FormatDuration(kSetupTimeout)));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return absl::OkStatus();
}

absl::Status RunBenchActor(const ReplayBenchConfig& c, const BenchServer& server, int id,
                           verbs::Provider* shared_provider, ReplayBenchState* state) {
  std::unique_ptr<verbs::Provider> own;
  verbs::Provider* provider = shared_provider;
  if (provider == nullptr) {
    ASSIGN_OR_RETURN(own, verbs::CreateProvider(c.provider));
    provider = own.get();
  }
  state->BeginConnect(c.connect_in_flight);
  absl::StatusOr<std::unique_ptr<ClientSession>> connected = ClientSession::Connect(
      provider, SessionOptionsFor(server, Role::kActor, static_cast<uint32_t>(id), c.actor_link));
  state->EndConnect();
  ASSIGN_OR_RETURN(std::unique_ptr<ClientSession> session, std::move(connected));
  actor::ExperienceWriterOptions wo;
  wo.max_batch = c.max_batch;
  wo.room_timeout = kRoomWaitSlice;
  ASSIGN_OR_RETURN(std::unique_ptr<actor::ExperienceWriter> writer,
                   actor::ExperienceWriter::Create(session.get(), wo));
  std::vector<uint8_t> payload(c.transition_bytes(), static_cast<uint8_t>(id));
  LatencyHistogram latencies;
  uint64_t tag = uint64_t{static_cast<uint32_t>(id)} << 40;
  ++state->ready;
  while (!state->stop) {
    for (uint32_t i = 0; i < c.max_batch; ++i, ++tag) {
      FillPayload(tag, &payload);
      RETURN_IF_ERROR(writer->Append(payload, InitialPriority(tag)));
    }
    const absl::Time start = absl::Now();
    // A full lease waits for ingest, which the rate limiter holds back until
    // the learner samples. The wait goes on while the run does (the batch
    // stays pending between tries) and ends with it: a learner that stopped
    // first must not fail the run.
    absl::Status flushed = writer->Flush();
    while (absl::IsResourceExhausted(flushed) && !state->stop) flushed = writer->Flush();
    if (absl::IsResourceExhausted(flushed)) break;
    RETURN_IF_ERROR(flushed);
    if (state->measuring) latencies.Record(absl::Now() - start);
    Publish(writer->stats(), &state->actor(id));
  }
  state->AddInsertLatencies(latencies);
  return absl::OkStatus();
}

namespace {

// The writers of a group, pipelined: each keeps up to writer_in_flight
// batches posted, and the group at most thread_in_flight (more would only
// queue in the provider and add latency); a pass polls every writer,
// refills an empty batch and submits it.
absl::Status DriveWritersPipelined(
    const ReplayBenchConfig& c, int first_id,
    const std::vector<std::unique_ptr<actor::ExperienceWriter>>& writers, ReplayBenchState* state) {
  const int count = static_cast<int>(writers.size());
  std::vector<uint8_t> payload(c.transition_bytes(), static_cast<uint8_t>(first_id));
  std::vector<uint64_t> tags(count);
  for (int k = 0; k < count; ++k) tags[k] = uint64_t{static_cast<uint32_t>(first_id + k)} << 40;
  const uint64_t cap = c.thread_in_flight == 0 ? UINT64_MAX : c.thread_in_flight;
  uint64_t in_flight = 0;  // the group's batches in flight
  while (!state->stop) {
    bool progress = false;
    for (int k = 0; k < count; ++k) {
      actor::ExperienceWriter* writer = writers[k].get();
      in_flight -= writer->in_flight();
      RETURN_IF_ERROR(writer->Poll());
      if (writer->pending() == 0) {
        for (uint32_t i = 0; i < c.max_batch; ++i, ++tags[k]) {
          FillPayload(tags[k], &payload);
          RETURN_IF_ERROR(writer->Append(payload, InitialPriority(tags[k])));
        }
      }
      if (in_flight + writer->in_flight() < cap) {
        ASSIGN_OR_RETURN(const bool posted, writer->Submit());
        progress = progress || posted;
      }
      in_flight += writer->in_flight();
      Publish(writer->stats(), &state->actor(first_id + k));
    }
    // Every lease full or every batch in flight: let the server run.
    if (!progress) std::this_thread::yield();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunBenchActorGroup(const ReplayBenchConfig& c, const BenchServer& server, int first_id,
                                int count, int connectors, ReplayBenchState* state) {
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Provider> provider, verbs::CreateProvider(c.provider));
  std::vector<std::unique_ptr<ClientSession>> sessions(count);
  std::vector<std::unique_ptr<actor::ExperienceWriter>> writers(count);
  actor::ExperienceWriterOptions wo;
  wo.max_batch = c.max_batch;
  wo.max_in_flight = std::max<uint32_t>(c.writer_in_flight, 1);
  // Helper k sets up actors k, k + connectors, ...: `connectors` handshakes
  // in flight, each waiting for the server while the others go on.
  std::vector<absl::Status> failures(std::max(connectors, 1));
  std::vector<std::thread> helpers;
  for (int k = 0; k < static_cast<int>(failures.size()); ++k) {
    helpers.emplace_back([&, k] {
      for (int i = k; i < count && !state->stop; i += static_cast<int>(failures.size())) {
        absl::StatusOr<std::unique_ptr<ClientSession>> session = ClientSession::Connect(
            provider.get(), SessionOptionsFor(server, Role::kActor,
                                              static_cast<uint32_t>(first_id + i), c.actor_link));
        if (!session.ok()) {
          failures[k] = session.status();
          return;
        }
        absl::StatusOr<std::unique_ptr<actor::ExperienceWriter>> writer =
            actor::ExperienceWriter::Create(session->get(), wo);
        if (!writer.ok()) {
          failures[k] = writer.status();
          return;
        }
        sessions[i] = std::move(*session);
        writers[i] = std::move(*writer);
      }
    });
  }
  for (std::thread& helper : helpers) helper.join();
  for (const absl::Status& failure : failures) RETURN_IF_ERROR(failure);
  if (state->stop) return absl::OkStatus();
  state->ready += count;
  if (c.writer_in_flight > 0) {
    RETURN_IF_ERROR(DriveWritersPipelined(c, first_id, writers, state));
    LatencyHistogram latencies;
    for (const auto& writer : writers) latencies.Merge(writer->stats().latency);
    state->AddInsertLatencies(latencies);
    return absl::OkStatus();
  }
  std::vector<uint8_t> payload(c.transition_bytes(), static_cast<uint8_t>(first_id));
  std::vector<uint64_t> tags(count);
  for (int k = 0; k < count; ++k) tags[k] = uint64_t{static_cast<uint32_t>(first_id + k)} << 40;
  LatencyHistogram latencies;
  while (!state->stop) {
    for (int k = 0; k < count && !state->stop; ++k) {
      actor::ExperienceWriter* writer = writers[k].get();
      for (uint32_t i = 0; i < c.max_batch; ++i, ++tags[k]) {
        FillPayload(tags[k], &payload);
        RETURN_IF_ERROR(writer->Append(payload, InitialPriority(tags[k])));
      }
      const absl::Time start = absl::Now();
      RETURN_IF_ERROR(writer->Flush());
      if (state->measuring) latencies.Record(absl::Now() - start);
      Publish(writer->stats(), &state->actor(first_id + k));
    }
  }
  state->AddInsertLatencies(latencies);
  return absl::OkStatus();
}

absl::Status RunStalledActors(const ReplayBenchConfig& c, const BenchServer& server, int first_id,
                              int count, ReplayBenchState* state) {
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Provider> provider, verbs::CreateProvider(c.provider));
  std::vector<std::unique_ptr<ClientSession>> sessions;
  std::vector<std::unique_ptr<client::RegisteredBuffer>> buffers;
  for (int id = first_id; id < first_id + count; ++id) {
    ASSIGN_OR_RETURN(
        std::unique_ptr<ClientSession> session,
        ClientSession::Connect(provider.get(), SessionOptionsFor(server, Role::kActor,
                                                                 static_cast<uint32_t>(id), {})));
    const protocol::LayoutConfig& l = session->config();
    const uint64_t first = session->directory().resume_sequence;
    const uint64_t lease_slots = protocol::LeaseSlots(l);
    const auto n = static_cast<uint32_t>(std::min<uint64_t>(
        {c.max_batch, lease_slots - first % lease_slots, protocol::ActorWindow(l)}));
    ASSIGN_OR_RETURN(std::unique_ptr<client::RegisteredBuffer> buffer,
                     client::RegisteredBuffer::Create(provider.get(), uint64_t{n} * l.slot_size));
    std::vector<uint8_t> payload(c.transition_bytes(), 0x33);
    for (uint32_t i = 0; i < n; ++i) {
      RETURN_IF_ERROR(protocol::SealSlot(buffer->data() + uint64_t{i} * l.slot_size, l.slot_size,
                                         first + i, static_cast<uint32_t>(id), 1.0f, 0,
                                         payload.data(), c.transition_bytes()));
    }
    // The slots, on their way; their commit words never follow.
    ASSIGN_OR_RETURN(const verbs::RemoteRegion slots,
                     session->Region(protocol::RegionKind::kSlots));
    ASSIGN_OR_RETURN(const int sink, session->AddSink());
    verbs::WorkRequest wr;
    wr.wr_id = ClientSession::WrId(sink, 1);
    wr.opcode = verbs::Opcode::kWrite;
    wr.signaled = true;
    wr.local = buffer->mr();
    wr.local_addr = buffer->data();
    wr.length = n * l.slot_size;
    wr.remote_addr = slots.addr + (first % lease_slots) * l.slot_size;
    wr.rkey = slots.rkey;
    RETURN_IF_ERROR(session->Post(absl::MakeConstSpan(&wr, 1)));
    RETURN_IF_ERROR(session->Wait(sink, wr.wr_id, absl::Seconds(30)));
    sessions.push_back(std::move(session));
    buffers.push_back(std::move(buffer));
  }
  state->ready += count;
  while (!state->stop) absl::SleepFor(absl::Milliseconds(5));
  return absl::OkStatus();
}

absl::Status RunBenchLearner(const ReplayBenchConfig& c, const BenchServer& server,
                             ReplayBenchState* state, LearnerFigures* figures) {
  ASSIGN_OR_RETURN(std::unique_ptr<verbs::Provider> provider, verbs::CreateProvider(c.provider));
  ASSIGN_OR_RETURN(std::unique_ptr<ClientSession> session,
                   ClientSession::Connect(provider.get(), LearnerSessionOptions(c, server)));
  learner::BatchReaderOptions ro;
  ro.learner_cache = c.learner_cache;
  ro.verify_slots = c.verify_slots;
  ro.retry_initial = c.reader_retry;
  ro.retry_max = c.reader_retry_max;
  ASSIGN_OR_RETURN(std::unique_ptr<learner::BatchReader> reader,
                   learner::BatchReader::Create(session.get(), ro));
  ASSIGN_OR_RETURN(std::unique_ptr<learner::PriorityWriter> priorities,
                   learner::PriorityWriter::Create(session.get()));
  std::mt19937_64 rng(c.seed);
  std::uniform_real_distribution<float> new_priority(0.05f, 2.0f);
  std::vector<float> td;
  const auto counts = [&] {
    LearnerLinkCounts k;
    k.link_bytes = session->link_bytes();
    k.transitions_fetched = reader->stats().transitions_fetched;
    k.distinct_transitions_fetched = reader->stats().distinct_transitions_fetched;
    return k;
  };
  bool in_window = false;
  ++state->ready;
  while (!state->stop) {
    if (state->measuring != in_window) {
      in_window = !in_window;
      (in_window ? figures->window_begin : figures->window_end) = counts();
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<learner::StagedBatch> batch = reader->Next(kNextPoll);
    if (absl::IsDeadlineExceeded(batch.status())) continue;
    RETURN_IF_ERROR(batch.status());
    if (state->measuring) figures->batch_wait.Record(absl::Now() - start);
    td.resize(batch->size());
    for (float& p : td) p = new_priority(rng);
    RETURN_IF_ERROR(priorities->Write(*batch, td));
    Publish(reader->stats(), &state->learner());
  }
  if (in_window) figures->window_end = counts();
  figures->reader = reader->stats();
  return ProbeStagingReads(provider.get(), session.get(), c.read_probes, &figures->batch_read);
}

}  // namespace dreplay::tools
