// Copyright dreplay authors.

#include "tools/bench/host_cpu.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"

namespace dreplay::tools {

absl::StatusOr<double> HostBusyCpuSeconds() {
  std::ifstream stat("/proc/stat");
  std::string line;
  if (!stat || !std::getline(stat, line)) {
    return absl::UnavailableError("host CPU: cannot read /proc/stat");
  }
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice"
  std::istringstream fields(line);
  std::string label;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  fields >> label >> user >> nice >> system >> idle >> iowait >> irq >> softirq;
  if (!fields || label != "cpu") {
    return absl::UnavailableError("host CPU: /proc/stat does not start with the cpu line");
  }
  const long ticks_per_s = sysconf(_SC_CLK_TCK);
  if (ticks_per_s <= 0) return absl::UnavailableError("host CPU: no clock tick rate");
  // Guest time is already counted in user and nice.
  const unsigned long long busy = user + nice + system + irq + softirq;
  return static_cast<double>(busy) / static_cast<double>(ticks_per_s);
}

}  // namespace dreplay::tools
