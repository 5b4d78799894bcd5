// Copyright dreplay authors.

#include "verbs/ibverbs_device.h"

#include <arpa/inet.h>
#include <dlfcn.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "verbs/ibverbs_errors.h"
#include "verbs/ibverbs_provider.h"

namespace dreplay::verbs::ibverbs {
namespace {

// ::ffff:a.b.c.d
bool GidIsIpv4Mapped(const ibv_gid& gid) {
  for (int i = 0; i < 10; ++i) {
    if (gid.raw[i] != 0) return false;
  }
  return gid.raw[10] == 0xff && gid.raw[11] == 0xff;
}

// fe80::/10
bool GidIsLinkLocal(const ibv_gid& gid) {
  return gid.raw[0] == 0xfe && (gid.raw[1] & 0xc0) == 0x80;
}

const char* TransportName(ibv_transport_type transport) {
  switch (transport) {
    case IBV_TRANSPORT_IB:
      return "InfiniBand";
    case IBV_TRANSPORT_IWARP:
      return "iWARP";
    case IBV_TRANSPORT_USNIC:
    case IBV_TRANSPORT_USNIC_UDP:
      return "usNIC";
    case IBV_TRANSPORT_UNSPECIFIED:
    case IBV_TRANSPORT_UNKNOWN:
      break;
  }
  return "unknown";
}

// libibverbs keeps the verbs of its first ABI (IBVERBS_1.0) for old
// binaries; their contexts are not the current ones, and current verbs such
// as ibv_query_gid_ex crash on them. A reference without a symbol version
// binds to that oldest version: it is what a shared object linked without
// -libverbs gets. Refuses to go on in that case instead of crashing later.
absl::Status CheckVerbsAbi() {
  void* const compat = dlvsym(RTLD_DEFAULT, "ibv_open_device", "IBVERBS_1.0");
  void* const ours = reinterpret_cast<void*>(&ibv_open_device);
  if (compat != nullptr && ours == compat) {
    return absl::InternalError(
        "this program is linked against libibverbs' IBVERBS_1.0 compatibility verbs (a shared "
        "object linked without -libverbs); relink it with -libverbs");
  }
  return absl::OkStatus();
}

// RAII for ibv_get_device_list.
class DeviceList {
 public:
  DeviceList() {
    errno = 0;
    list_ = ibv_get_device_list(&count_);
    saved_errno_ = errno;
    if (list_ == nullptr) count_ = 0;
  }
  ~DeviceList() {
    if (list_ != nullptr) ibv_free_device_list(list_);
  }
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;

  // Why there is nothing to open, or OK.
  absl::Status status() const {
    if (list_ == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          "no RDMA device: ", IbvNullResultToStatus(saved_errno_, "ibv_get_device_list").message(),
          " (no kernel RDMA support?)"));
    }
    if (count_ == 0) {
      return absl::NotFoundError(
          "no RDMA device: libibverbs found 0 devices (for Soft-RoCE, run "
          "tools/launch/softroce_setup.sh as root)");
    }
    return absl::OkStatus();
  }
  int size() const { return count_; }
  ibv_device* operator[](int i) const { return list_[i]; }

 private:
  ibv_device** list_ = nullptr;
  int count_ = 0;
  int saved_errno_ = 0;
};

// The GID type of entry `index`: ibv_query_gid_ex where the library and
// kernel have it, else sysfs (ports/<p>/gid_attrs/types/<i>). kNotFound for
// an empty entry.
absl::StatusOr<std::pair<ibv_gid, ibv_gid_type>> QueryGid(ibv_context* ctx, const char* ibdev_path,
                                                          int port, int index) {
  ibv_gid_entry entry;
  std::memset(&entry, 0, sizeof(entry));
  const int rc = ibv_query_gid_ex(ctx, port, index, &entry, 0);
  if (rc == 0) {
    return std::make_pair(entry.gid, static_cast<ibv_gid_type>(entry.gid_type));
  }
  const int error_number = std::abs(rc);
  if (error_number == ENODATA || error_number == ENOENT) {
    return absl::NotFoundError(absl::StrCat("GID index ", index, " is empty"));
  }
  if (error_number != EOPNOTSUPP && error_number != ENOSYS) {
    return IbvResultToStatus(rc, absl::StrCat("ibv_query_gid_ex(", index, ")"));
  }
  // Older kernels: the plain query and the type from sysfs.
  ibv_gid gid;
  RETURN_IF_ERROR(IbvResultToStatus(ibv_query_gid(ctx, port, index, &gid),
                                    absl::StrCat("ibv_query_gid(", index, ")")));
  if (GidIsZero(gid)) {
    return absl::NotFoundError(absl::StrCat("GID index ", index, " is empty"));
  }
  ibv_gid_type type = IBV_GID_TYPE_IB;
  std::ifstream in(absl::StrCat(ibdev_path, "/ports/", port, "/gid_attrs/types/", index));
  std::string text;
  if (in && std::getline(in, text)) {
    text = std::string(absl::StripAsciiWhitespace(text));
    if (text == "RoCE v2") {
      type = IBV_GID_TYPE_ROCE_V2;
    } else if (text == "IB/RoCE v1") {
      type = IBV_GID_TYPE_ROCE_V1;
    }
  }
  return std::make_pair(gid, type);
}

const char* GidTypeName(ibv_gid_type type, bool ethernet) {
  switch (type) {
    case IBV_GID_TYPE_ROCE_V2:
      return "RoCE v2";
    case IBV_GID_TYPE_ROCE_V1:
      return "RoCE v1";
    case IBV_GID_TYPE_IB:
      return ethernet ? "RoCE v1" : "IB";
  }
  return "unknown";
}

GidKind KindOf(ibv_gid_type type, bool ethernet) {
  if (type == IBV_GID_TYPE_ROCE_V2) return GidKind::kRoceV2;
  if (type == IBV_GID_TYPE_ROCE_V1 || ethernet) return GidKind::kRoceV1;
  return GidKind::kInfiniBand;
}

// Records GID table entry `index` as the one the device's queue pairs use.
void SetGid(Device* device, int index, const ibv_gid& gid, ibv_gid_type type) {
  const bool ethernet = device->is_ethernet();
  device->gid_index = index;
  device->gid = gid;
  device->gid_type = GidTypeName(type, ethernet);
  device->gid_kind = KindOf(type, ethernet);
}

// Chooses the GID of device->port: the requested index, or automatically a
// RoCE v2 GID with an IPv4-mapped address, else a RoCE v2 global GID, else
// any RoCE v2 GID, else the first valid GID.
absl::Status ChooseGid(Device* device, const char* ibdev_path, int requested_index) {
  const int table = device->port_attr.gid_tbl_len;
  const bool ethernet = device->is_ethernet();
  if (requested_index >= 0) {
    if (requested_index >= table) {
      return absl::InvalidArgumentError(absl::StrCat("gid_index ", requested_index,
                                                     " is out of range: ", device->name, " port ",
                                                     device->port, " has ", table, " GID entries"));
    }
    auto gid = QueryGid(device->context, ibdev_path, device->port, requested_index);
    if (!gid.ok()) {
      return absl::NotFoundError(absl::StrCat("gid_index ", requested_index, " on ", device->name,
                                              " port ", device->port, ": ",
                                              gid.status().message()));
    }
    SetGid(device, requested_index, gid->first, gid->second);
    return absl::OkStatus();
  }
  // Lower rank is better.
  int best_rank = std::numeric_limits<int>::max();
  for (int i = 0; i < table; ++i) {
    auto gid = QueryGid(device->context, ibdev_path, device->port, i);
    if (!gid.ok()) {
      if (!absl::IsNotFound(gid.status())) {
        VLOG(1) << device->name << ": " << gid.status();
      }
      continue;
    }
    if (GidIsZero(gid->first)) continue;
    const bool v2 = gid->second == IBV_GID_TYPE_ROCE_V2;
    int rank = 3;
    if (v2 && GidIsIpv4Mapped(gid->first)) {
      rank = 0;
    } else if (v2 && !GidIsLinkLocal(gid->first)) {
      rank = 1;
    } else if (v2) {
      rank = 2;
    }
    if (rank < best_rank) {
      best_rank = rank;
      SetGid(device, i, gid->first, gid->second);
    }
    if (rank == 0) break;
  }
  if (best_rank == std::numeric_limits<int>::max()) {
    return absl::NotFoundError(absl::StrCat(device->name, " port ", device->port,
                                            " has no valid GID (is the network interface up and "
                                            "does it have an IP address?)"));
  }
  if (ethernet && best_rank > 0) {
    LOG(WARNING) << device->name << ": no IPv4-mapped RoCE v2 GID; using " << device->Describe();
  }
  return absl::OkStatus();
}

// Opens `dev`, checks the port and allocates the PD. kUnavailable when the
// port is not active (the caller may try another device).
absl::StatusOr<std::shared_ptr<Device>> OpenOne(ibv_device* dev, const ProviderOptions& options) {
  auto device = std::make_shared<Device>();
  device->name = ibv_get_device_name(dev);
  device->port = options.ib_port;
  device->traffic_class = static_cast<uint8_t>(options.traffic_class);
  // Verb names are built before the calls so that nothing runs between a
  // verb and the errno it leaves.
  const std::string open_verb = absl::StrCat("ibv_open_device(", device->name, ")");
  const std::string pd_verb = absl::StrCat("ibv_alloc_pd(", device->name, ")");
  ASSIGN_OR_RETURN(device->context, IbvCheckPointer(ibv_open_device(dev), open_verb));
  RETURN_IF_ERROR(IbvResultToStatus(ibv_query_device(device->context, &device->attr),
                                    absl::StrCat("ibv_query_device(", device->name, ")")));
  const std::vector<std::string> missing = MissingCapabilities(device->attr, dev->transport_type);
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        device->name, " cannot serve dreplay's protocol: ", absl::StrJoin(missing, ", "),
        " (use --provider=soft)"));
  }
  if (options.ib_port > device->attr.phys_port_cnt) {
    return absl::InvalidArgumentError(
        absl::StrCat("ib_port ", options.ib_port, " does not exist: ", device->name, " has ",
                     static_cast<int>(device->attr.phys_port_cnt), " port(s)"));
  }
  RETURN_IF_ERROR(
      IbvResultToStatus(ibv_query_port(device->context, options.ib_port, &device->port_attr),
                        absl::StrCat("ibv_query_port(", device->name, ", ", options.ib_port, ")")));
  if (device->port_attr.state != IBV_PORT_ACTIVE) {
    return absl::UnavailableError(absl::StrCat(device->name, " port ", options.ib_port, " is ",
                                               ibv_port_state_str(device->port_attr.state),
                                               ", not ACTIVE"));
  }
  device->ibdev_path = dev->ibdev_path;
  RETURN_IF_ERROR(ChooseGid(device.get(), dev->ibdev_path, options.gid_index));
  ASSIGN_OR_RETURN(device->pd, IbvCheckPointer(ibv_alloc_pd(device->context), pd_verb));
  return device;
}

}  // namespace

Device::~Device() {
  if (pd != nullptr) {
    const absl::Status s = IbvResultToStatus(ibv_dealloc_pd(pd), "ibv_dealloc_pd");
    LOG_IF(ERROR, !s.ok()) << name << ": " << s;
  }
  if (context != nullptr) {
    const absl::Status s = IbvResultToStatus(ibv_close_device(context), "ibv_close_device");
    LOG_IF(ERROR, !s.ok()) << name << ": " << s;
  }
}

std::string Device::Describe() const {
  return absl::StrCat(name, ":", port, " gid[", gid_index, "] ", GidToString(gid), " (", gid_type,
                      ")");
}

absl::StatusOr<std::shared_ptr<Device>> OpenDevice(const ProviderOptions& options) {
  RETURN_IF_ERROR(CheckVerbsAbi());
  DeviceList devices;
  RETURN_IF_ERROR(devices.status());
  std::vector<std::string> names;
  std::vector<std::string> skipped;
  for (int i = 0; i < devices.size(); ++i) {
    const std::string name = ibv_get_device_name(devices[i]);
    names.push_back(name);
    if (!options.ib_device.empty() && name != options.ib_device) continue;
    absl::StatusOr<std::shared_ptr<Device>> device = OpenOne(devices[i], options);
    if (!device.ok()) {
      // A named device's error is final; without a name, try the next one.
      if (!options.ib_device.empty()) return device.status();
      skipped.push_back(std::string(device.status().message()));
      continue;
    }
    return device;
  }
  if (!options.ib_device.empty()) {
    return absl::NotFoundError(absl::StrCat("RDMA device \"", options.ib_device,
                                            "\" not found; devices: ", absl::StrJoin(names, ", ")));
  }
  return absl::NotFoundError(absl::StrCat("no usable RDMA device with port ", options.ib_port,
                                          " active: ", absl::StrJoin(skipped, "; ")));
}

std::vector<std::string> MissingCapabilities(const ibv_device_attr& attr,
                                             ibv_transport_type transport) {
  std::vector<std::string> missing;
  if (transport != IBV_TRANSPORT_IB) {
    missing.push_back(
        absl::StrCat("transport ", TransportName(transport), " (not InfiniBand/RoCE)"));
  }
  if ((attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) == 0 || attr.max_mw <= 0) {
    missing.push_back(absl::StrCat("type-2 memory windows (max_mw ", attr.max_mw, ")"));
  }
  return missing;
}

absl::StatusOr<std::pair<ibv_gid, GidKind>> CurrentGid(const Device& device) {
  auto gid = QueryGid(device.context, device.ibdev_path.c_str(), device.port, device.gid_index);
  if (!gid.ok() || GidIsZero(gid->first)) {
    return absl::UnavailableError(absl::StrCat(
        device.name, " port ", device.port, " gid[", device.gid_index, "] (",
        GidToString(device.gid), " at start) is ",
        gid.ok() ? "empty" : std::string(gid.status().message()),
        " now: its address was removed; restore it, or restart with another --gid_index"));
  }
  if (std::memcmp(gid->first.raw, device.gid.raw, sizeof(device.gid.raw)) != 0) {
    LOG_FIRST_N(WARNING, 1) << device.name << " gid[" << device.gid_index << "] changed from "
                            << GidToString(device.gid) << " to " << GidToString(gid->first)
                            << "; new connections use the new one";
  }
  return std::make_pair(gid->first, KindOf(gid->second, device.is_ethernet()));
}

std::string GidToString(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET6, gid.raw, text, sizeof(text));
  return text;
}

bool GidIsZero(const ibv_gid& gid) {
  for (uint8_t b : gid.raw) {
    if (b != 0) return false;
  }
  return true;
}

int MtuBytes(ibv_mtu mtu) { return 128 << static_cast<int>(mtu); }

}  // namespace dreplay::verbs::ibverbs

namespace dreplay::verbs {

// Declared in ibverbs_provider.h; it is device enumeration, so it lives here.
bool IbverbsDeviceAvailable(std::string* why) {
  ibverbs::DeviceList devices;
  const absl::Status listed = devices.status();
  if (!listed.ok()) {
    if (why != nullptr) *why = std::string(listed.message());
    return false;
  }
  std::vector<std::string> usable;
  std::vector<std::string> problems;
  for (int i = 0; i < devices.size(); ++i) {
    const char* name = ibv_get_device_name(devices[i]);
    errno = 0;
    ibv_context* context = ibv_open_device(devices[i]);
    if (context == nullptr) {
      problems.push_back(std::string(
          IbvNullResultToStatus(errno, absl::StrCat("ibv_open_device(", name, ")")).message()));
      continue;
    }
    ibv_device_attr attr;
    bool active = false;
    if (ibv_query_device(context, &attr) == 0) {
      for (int port = 1; port <= attr.phys_port_cnt && !active; ++port) {
        ibv_port_attr port_attr;
        active =
            ibv_query_port(context, port, &port_attr) == 0 && port_attr.state == IBV_PORT_ACTIVE;
      }
    }
    ibv_close_device(context);
    if (active) {
      usable.push_back(name);
    } else {
      problems.push_back(absl::StrCat(name, ": no active port"));
    }
  }
  if (usable.empty()) {
    if (why != nullptr) {
      *why = absl::StrCat("no RDMA device: ", devices.size(),
                          " device(s) listed, none usable: ", absl::StrJoin(problems, "; "));
    }
    return false;
  }
  if (why != nullptr) *why = absl::StrCat("RDMA devices: ", absl::StrJoin(usable, ", "));
  return true;
}

}  // namespace dreplay::verbs
