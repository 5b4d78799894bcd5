// Copyright dreplay authors.
//
// ibverbs_provider.cc: the libibverbs provider: memory registration and the
// factory. The rest lives in
//   ibverbs_device.h      opening the device, port and GID choice;
//   ibverbs_connection.h  the listener and Connect (TCP exchange, INIT ->
//                         RTR -> RTS), over ibverbs_wire.h's messages;
//   ibverbs_queue_pair.h  the queue pair's datapath.

#include "verbs/ibverbs_provider.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "verbs/access_rules.h"
#include "verbs/ibverbs_attributes.h"
#include "verbs/ibverbs_connection.h"
#include "verbs/ibverbs_device.h"
#include "verbs/ibverbs_errors.h"
#include "verbs/ibverbs_queue_pair.h"

namespace dreplay::verbs {
namespace {

using ibverbs::Device;

// True when this process may lock memory beyond RLIMIT_MEMLOCK
// (CAP_IPC_LOCK, bit 14 of the effective capabilities).
bool CanLockWithoutLimit() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const uint64_t caps = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (caps >> 14) & 1;
  }
  return false;
}

// What to raise when a registration does not fit RLIMIT_MEMLOCK.
std::string MemlockAdvice(size_t length, const rlimit& limit) {
  return absl::StrCat("registering ", length,
                      " bytes pins them, which counts against "
                      "RLIMIT_MEMLOCK (",
                      limit.rlim_cur,
                      " bytes now): raise it, e.g. `ulimit -l "
                      "unlimited`, LimitMEMLOCK=infinity for a systemd unit, or a memlock line in "
                      "/etc/security/limits.conf");
}

// Refuses a registration larger than RLIMIT_MEMLOCK before the device does
// (it would fail with a bare ENOMEM). Pages this process pinned before also
// count, so a smaller one can still fail: RegisterMemory then says the same.
absl::Status CheckMemlock(size_t length) {
  rlimit limit;
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) {
    return absl::OkStatus();
  }
  if (length <= limit.rlim_cur || CanLockWithoutLimit()) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("RegisterMemory: ", MemlockAdvice(length, limit)));
}

class IbverbsMemoryRegion : public MemoryRegion, public ibverbs::IbvRegionHandle {
 public:
  IbverbsMemoryRegion(std::shared_ptr<Device> device, ibv_mr* mr, uint32_t access)
      : device_(std::move(device)), mr_(mr), access_(access) {}
  ~IbverbsMemoryRegion() override {
    // Devices refuse to deregister a region with a window bound to it.
    device_->windows.ReleaseRegion(device_->api, mr_);
    const absl::Status s = IbvResultToStatus(device_->api->DeregMr(mr_), "ibv_dereg_mr");
    LOG_IF(ERROR, !s.ok()) << device_->name << ": " << s;
  }
  IbverbsMemoryRegion(const IbverbsMemoryRegion&) = delete;
  IbverbsMemoryRegion& operator=(const IbverbsMemoryRegion&) = delete;

  void* addr() const override { return mr_->addr; }
  size_t length() const override { return mr_->length; }
  uint32_t lkey() const override { return mr_->lkey; }
  uint32_t rkey() const override { return mr_->rkey; }
  uint32_t access() const override { return access_; }
  ibv_mr* ibv_region() const override { return mr_; }

 private:
  const std::shared_ptr<Device> device_;
  ibv_mr* const mr_;
  const uint32_t access_;
};

class IbverbsProvider : public Provider {
 public:
  IbverbsProvider(std::shared_ptr<Device> device,
                  std::unique_ptr<ibverbs::AsyncEventThread> async_events)
      : device_(std::move(device)), async_events_(std::move(async_events)) {}

  std::string name() const override { return "ibverbs"; }

  absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* addr, size_t length,
                                                               uint32_t access) override {
    if (addr == nullptr || length == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "RegisterMemory: null or empty buffer (addr %p, length %d)", addr, length));
    }
    // The same rule as the soft provider's: no local write added silently.
    const absl::Status flags = CheckAccessFlags(access);
    if (!flags.ok())
      return absl::InvalidArgumentError(absl::StrCat("RegisterMemory: ", flags.message()));
    if ((access & kRemoteAtomic) && !device_->has_atomics()) {
      return absl::UnimplementedError(absl::StrCat("RegisterMemory: kRemoteAtomic asked, but ",
                                                   device_->name,
                                                   " has no atomic support (atomic_cap NONE)"));
    }
    if (length > device_->attr.max_mr_size) {
      return absl::InvalidArgumentError(absl::StrCat("RegisterMemory: length ", length, " exceeds ",
                                                     device_->name, "'s max_mr_size ",
                                                     device_->attr.max_mr_size));
    }
    RETURN_IF_ERROR(CheckMemlock(length));
    errno = 0;
    ibv_mr* mr = ibv_reg_mr(device_->pd, addr, length, ibverbs::ToIbvAccess(access));
    if (mr == nullptr) {
      const int error_number = errno;
      rlimit limit;
      if (error_number == ENOMEM && getrlimit(RLIMIT_MEMLOCK, &limit) == 0 &&
          limit.rlim_cur != RLIM_INFINITY) {
        return absl::ResourceExhaustedError(
            absl::StrCat("ibv_reg_mr: out of memory; ", MemlockAdvice(length, limit)));
      }
      return IbvNullResultToStatus(error_number, absl::StrCat("ibv_reg_mr(", length, " bytes)"));
    }
    return std::unique_ptr<MemoryRegion>(new IbverbsMemoryRegion(device_, mr, access));
  }

  absl::StatusOr<std::unique_ptr<Listener>> Listen(const std::string& host,
                                                   uint16_t port) override {
    return ibverbs::Listen(device_, host, port);
  }

  absl::StatusOr<Connection> Connect(const std::string& host, uint16_t port,
                                     const std::string& payload,
                                     const QueuePairOptions& options) override {
    return ibverbs::Connect(device_, host, port, payload, options);
  }

 private:
  // Declared first: the context outlives the event thread, which is joined
  // first on destruction.
  const std::shared_ptr<Device> device_;
  // Reads the device's asynchronous events (ibverbs_async_events.h).
  const std::unique_ptr<ibverbs::AsyncEventThread> async_events_;
};

// Starts the thread that reads `device`'s asynchronous events. The async fd
// is made non-blocking, so each wake-up drains what is pending.
absl::StatusOr<std::unique_ptr<ibverbs::AsyncEventThread>> StartAsyncEvents(Device* device) {
  const int fd = device->context->async_fd;
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return absl::InternalError(absl::StrCat(device->name, ": cannot make the async event fd ", fd,
                                            " non-blocking: ", std::strerror(errno)));
  }
  return ibverbs::AsyncEventThread::Start(fd, [device] {
    ibverbs::DrainAsyncEvents(device->context, device->name, device->port, &device->faults);
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<Provider>> CreateIbverbsProvider(const ProviderOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  ASSIGN_OR_RETURN(std::shared_ptr<Device> device, ibverbs::OpenDevice(options));
  LOG(INFO) << "ibverbs provider on " << device->Describe() << ", active MTU "
            << ibverbs::MtuBytes(device->port_attr.active_mtu) << ", max_qp_rd_atom "
            << device->attr.max_qp_rd_atom << ", atomics "
            << (device->has_atomics() ? "yes" : "no");
  ASSIGN_OR_RETURN(std::unique_ptr<ibverbs::AsyncEventThread> async_events,
                   StartAsyncEvents(device.get()));
  return std::unique_ptr<Provider>(new IbverbsProvider(std::move(device), std::move(async_events)));
}

}  // namespace dreplay::verbs
