// Copyright dreplay authors.
//
// host_cpu.h: the CPU time the whole host spent busy, from /proc/stat: what
// the benchmarks divide by the bytes they moved, so that a path's cost is
// counted in every process and in the kernel (the peer's NIC thread, a
// socket's softirq work), not in the measuring thread alone.
//
//   const absl::StatusOr<double> before = HostBusyCpuSeconds();
//   ... the measured window ...
//   const absl::StatusOr<double> after = HostBusyCpuSeconds();
//   const double cpu_s = *after - *before;
//
// Busy is user + nice + system + irq + softirq, summed over every CPU; idle,
// I/O wait and time stolen by a hypervisor are not. Every process counts,
// so the figure is the benchmark's only on an otherwise idle machine; its
// resolution is one clock tick (usually 10 ms) per CPU.
//
// Thread-safe.

#ifndef DREPLAY_TOOLS_BENCH_HOST_CPU_H_
#define DREPLAY_TOOLS_BENCH_HOST_CPU_H_

#include "absl/status/statusor.h"

namespace dreplay::tools {

// The host's busy CPU seconds since boot. kUnavailable when /proc/stat
// cannot be read or parsed.
absl::StatusOr<double> HostBusyCpuSeconds();

}  // namespace dreplay::tools

#endif  // DREPLAY_TOOLS_BENCH_HOST_CPU_H_
