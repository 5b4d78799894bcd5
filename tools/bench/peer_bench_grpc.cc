// Copyright dreplay authors.

#include "tools/bench/peer_bench_grpc.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "replay/replay_memory.h"
#include "tools/bench/peer_bench.grpc.pb.h"
#include "tools/bench/peer_bench_window.h"

namespace dreplay::tools {
namespace {

namespace pb = peerbench;

constexpr int kWriterDepth = 2;  // insert messages in flight per writer
constexpr int kReaderDepth = 4;  // sample requests in flight
constexpr double kBeta = 0.4;
// Beyond the warmup and the window, how long a stream may last: the
// window's setup bound (60 s, prefill included) and as much again.
constexpr absl::Duration kStreamSlack = absl::Seconds(120);

absl::Status FromGrpc(const grpc::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(what, ": ", s.error_message()));
}

// The prioritized memory behind the service. Thread-safe.
class PeerReplayService final : public pb::PeerReplay::Service {
 public:
  PeerReplayService(std::unique_ptr<replay::ReplayMemory> memory, PeerArmState* state)
      : memory_(std::move(memory)), state_(state), payloads_(memory_->capacity()) {}

  grpc::Status Insert(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<pb::InsertResponse, pb::InsertRequest>* stream) override {
    pb::InsertRequest request;
    pb::InsertResponse response;
    std::vector<std::shared_ptr<const std::string>> payloads;
    std::vector<float> priorities;
    while (stream->Read(&request)) {
      const int n = request.transitions_size();
      payloads.clear();
      priorities.clear();
      for (int i = 0; i < n; ++i) {
        payloads.push_back(std::make_shared<const std::string>(
            std::move(*request.mutable_transitions(i)->mutable_payload())));
        priorities.push_back(request.transitions(i).priority());
      }
      {
        MutexLock lock(&mu_);
        const uint64_t capacity = memory_->capacity();
        // Consecutive sequences fill consecutive indices up to the wrap:
        // at most two runs, each in one InsertRun, as dreplay's ingest does.
        for (size_t done = 0; done < priorities.size();) {
          const uint64_t index = next_sequence_ & (capacity - 1);
          const size_t count = std::min<size_t>(priorities.size() - done, capacity - index);
          memory_->InsertRun(index, next_sequence_,
                             absl::MakeConstSpan(priorities).subspan(done, count));
          for (size_t k = 0; k < count; ++k) {
            payloads_[index + k] = std::move(payloads[done + k]);
          }
          next_sequence_ += count;
          done += count;
        }
      }
      state_->inserted += static_cast<uint64_t>(n);
      response.set_inserted(static_cast<uint64_t>(n));
      if (!stream->Write(response)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status Sample(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<pb::SampleResponse, pb::SampleRequest>* stream) override {
    pb::SampleRequest request;
    pb::SampleResponse response;
    std::vector<replay::SampledItem> items;
    std::vector<std::shared_ptr<const std::string>> held;
    while (stream->Read(&request)) {
      items.resize(request.batch_size());
      held.clear();
      {
        MutexLock lock(&mu_);
        for (const pb::PriorityUpdate& u : request.updates()) {
          if (u.key() < memory_->capacity()) {
            memory_->UpdatePriority(u.key(), u.sequence(), u.priority());
          }
        }
        const int n = memory_->size() == 0 ? 0
                                           : memory_->SampleBatch(request.batch_size(), kBeta,
                                                                  absl::MakeSpan(items));
        items.resize(static_cast<size_t>(n));
        for (const replay::SampledItem& item : items) held.push_back(payloads_[item.index]);
      }
      response.Clear();
      for (size_t i = 0; i < items.size(); ++i) {
        pb::SampledTransition* t = response.add_transitions();
        t->set_key(items[i].index);
        t->set_sequence(items[i].sequence);
        t->set_probability(items[i].probability);
        t->set_payload(*held[i]);
      }
      if (!stream->Write(response)) break;
    }
    return grpc::Status::OK;
  }

 private:
  Mutex mu_;
  std::unique_ptr<replay::ReplayMemory> memory_ ABSL_GUARDED_BY(mu_);
  PeerArmState* const state_;
  std::vector<std::shared_ptr<const std::string>> payloads_ ABSL_GUARDED_BY(mu_);
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 0;
};

// A channel of its own (its own TCP connection), without message limits.
std::unique_ptr<pb::PeerReplay::Stub> NewStub(int port) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return pb::PeerReplay::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(), args));
}

// A stream waits for its connection instead of failing at a transient
// connect error (seen once under load), within a bound that covers the
// setup, the warmup and the window.
void PrepareStream(const PeerCase& c, grpc::ClientContext* context) {
  context->set_wait_for_ready(true);
  context->set_deadline(std::chrono::system_clock::now() +
                        absl::ToChronoSeconds(kStreamSlack + c.warmup + c.duration));
}

absl::Status RunWriter(const PeerCase& c, int port, int id, PeerArmState* state) {
  std::unique_ptr<pb::PeerReplay::Stub> stub = NewStub(port);
  grpc::ClientContext context;
  PrepareStream(c, &context);
  auto stream = stub->Insert(&context);
  pb::InsertRequest request;
  for (uint32_t i = 0; i < c.insert_batch; ++i) {
    pb::Transition* t = request.add_transitions();
    t->set_payload(std::string(c.payload_bytes, static_cast<char>('a' + id)));
  }
  pb::InsertResponse response;
  uint64_t sequence = 0;
  int in_flight = 0;
  const uint64_t share = (c.prefill + c.writers - 1) / c.writers;
  auto insert = [&]() -> bool {
    for (pb::Transition& t : *request.mutable_transitions()) {
      std::memcpy(t.mutable_payload()->data(), &sequence, sizeof(sequence));
      t.set_priority(0.1f * static_cast<float>(sequence % 17 + 1));
      ++sequence;
    }
    if (!stream->Write(request)) return false;
    if (++in_flight < kWriterDepth) return true;
    --in_flight;
    return stream->Read(&response);
  };
  bool ok = true;
  for (uint64_t n = 0; ok && n < share; n += c.insert_batch) ok = insert();
  while (ok && in_flight > 0 && stream->Read(&response)) --in_flight;
  if (ok) ++state->ready;
  while (ok && !state->stop) ok = insert();
  stream->WritesDone();
  while (stream->Read(&response)) {
  }
  RETURN_IF_ERROR(FromGrpc(stream->Finish(), "Insert stream"));
  if (!ok) return absl::UnavailableError("Insert stream broke");
  return absl::OkStatus();
}

absl::Status RunReader(const PeerCase& c, int port, PeerArmState* state) {
  std::unique_ptr<pb::PeerReplay::Stub> stub = NewStub(port);
  grpc::ClientContext context;
  PrepareStream(c, &context);
  auto stream = stub->Sample(&context);
  std::mt19937_64 rng(c.seed);
  std::uniform_real_distribution<float> new_priority(0.05f, 2.0f);
  pb::SampleRequest request;
  request.set_batch_size(c.batch_size);
  pb::SampleResponse response;
  bool ok = true;
  for (int i = 0; ok && i < kReaderDepth; ++i) ok = stream->Write(request);
  if (ok) ++state->ready;
  while (ok && !state->stop) {
    if (!(ok = stream->Read(&response))) break;
    state->sampled += static_cast<uint64_t>(response.transitions_size());
    request.Clear();
    request.set_batch_size(c.batch_size);
    for (const pb::SampledTransition& t : response.transitions()) {
      pb::PriorityUpdate* u = request.add_updates();
      u->set_key(t.key());
      u->set_sequence(t.sequence());
      u->set_priority(new_priority(rng));
    }
    ok = stream->Write(request);
  }
  stream->WritesDone();
  while (stream->Read(&response)) {
  }
  RETURN_IF_ERROR(FromGrpc(stream->Finish(), "Sample stream"));
  if (!ok) return absl::UnavailableError("Sample stream broke");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PeerCaseResult> RunGrpcArm(const PeerCase& c) {
  replay::ReplayMemoryOptions mo;
  mo.capacity = c.capacity;
  mo.alpha = c.alpha;
  mo.seed = c.seed;
  ASSIGN_OR_RETURN(std::unique_ptr<replay::ReplayMemory> memory, replay::ReplayMemory::Create(mo));
  PeerArmState state;
  PeerReplayService service(std::move(memory), &state);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError("the gRPC server did not start on 127.0.0.1:0");
  }
  std::vector<PeerClient> clients;
  for (int w = 0; w < c.writers; ++w) {
    clients.push_back({absl::StrCat("grpc writer ", w),
                       [&, w](PeerArmState* s) { return RunWriter(c, port, w, s); }});
  }
  clients.push_back({"grpc reader", [&](PeerArmState* s) { return RunReader(c, port, s); }});
  absl::StatusOr<PeerCaseResult> r =
      RunPeerClients(c, PeerSystem::kGrpc, clients, ProcessCpuSeconds, &state);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Wait();
  return r;
}

}  // namespace dreplay::tools
