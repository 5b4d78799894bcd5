// Copyright dreplay authors.

#include "tools/bench/peer_bench_window.h"

#include <time.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"

namespace dreplay::tools {
namespace {

constexpr absl::Duration kSetupTimeout = absl::Seconds(60);

absl::Status WaitReady(PeerArmState* state, int n) {
  const absl::Time deadline = absl::Now() + kSetupTimeout;
  while (state->ready.load() < n) {
    RETURN_IF_ERROR(state->status());
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(state->ready.load(), " of ", n,
                                                      " clients connected within ",
                                                      absl::FormatDuration(kSetupTimeout)));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return state->status();
}

}  // namespace

void PeerArmState::Fail(const absl::Status& s) {
  {
    MutexLock lock(&mu_);
    if (status_.ok()) status_ = s;
  }
  stop = true;
}

absl::Status PeerArmState::status() const {
  MutexLock lock(&mu_);
  return status_;
}

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

absl::StatusOr<PeerCaseResult> RunPeerClients(const PeerCase& c, PeerSystem system,
                                              const std::vector<PeerClient>& clients,
                                              const std::function<double()>& cpu_seconds,
                                              PeerArmState* state) {
  std::vector<std::thread> threads;
  threads.reserve(clients.size());
  for (const PeerClient& client : clients) {
    threads.emplace_back([&client, state] {
      const absl::Status s = client.run(state);
      if (!s.ok()) {
        state->Fail(absl::Status(s.code(), absl::StrCat(client.name, ": ", s.message())));
      }
    });
  }
  PeerCaseResult r;
  r.payload_bytes = c.payload_bytes;
  r.system = system;
  absl::Status status = WaitReady(state, static_cast<int>(clients.size()));
  if (status.ok()) {
    absl::SleepFor(c.warmup);
    const uint64_t inserted0 = state->inserted.load();
    const uint64_t sampled0 = state->sampled.load();
    const absl::Time start = absl::Now();
    const double cpu0 = cpu_seconds();
    absl::SleepFor(c.duration);
    const uint64_t inserted1 = state->inserted.load();
    const uint64_t sampled1 = state->sampled.load();
    r.seconds = absl::ToDoubleSeconds(absl::Now() - start);
    r.cpu_seconds = cpu_seconds() - cpu0;
    r.inserted_per_s = static_cast<double>(inserted1 - inserted0) / r.seconds;
    r.sampled_per_s = static_cast<double>(sampled1 - sampled0) / r.seconds;
  }
  state->stop = true;
  for (std::thread& t : threads) t.join();
  RETURN_IF_ERROR(status);
  RETURN_IF_ERROR(state->status());
  return r;
}

}  // namespace dreplay::tools
