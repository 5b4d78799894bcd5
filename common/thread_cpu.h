// Copyright dreplay authors.
//
// thread_cpu.h: the calling thread's CPU time, for costs counted where they
// are spent (compression on the core thread, decompression on the
// learner's).

#ifndef DREPLAY_COMMON_THREAD_CPU_H_
#define DREPLAY_COMMON_THREAD_CPU_H_

#include <time.h>

#include <cstdint>

namespace dreplay {

// CLOCK_THREAD_CPUTIME_ID in nanoseconds (0 if the clock is unavailable).
inline uint64_t ThreadCpuNanos() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace dreplay

#endif  // DREPLAY_COMMON_THREAD_CPU_H_
