// Copyright dreplay authors.
//
// ibverbs_device.h: the ibverbs provider's device: opening it, checking the
// port, choosing the GID, and allocating the protection domain.
//
// Device selection (ProviderOptions):
//  * ib_device names the device; empty picks the first device whose port
//    ib_port is active.
//  * gid_index names the GID table entry; -1 picks a RoCE v2 GID with an
//    IPv4-mapped address, else a RoCE v2 global GID, else any RoCE v2 GID,
//    else the first valid GID (with a warning on Ethernet).
//  * The GID type comes from ibv_query_gid_ex where the library and kernel
//    have it, else from sysfs.
//
// Thread-safe: a Device is constant after OpenDevice(), but for its
// thread-safe FaultRegistry.

#ifndef DREPLAY_VERBS_IBVERBS_DEVICE_H_
#define DREPLAY_VERBS_IBVERBS_DEVICE_H_

#include <infiniband/verbs.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "verbs/ibverbs_api.h"
#include "verbs/ibverbs_async_events.h"
#include "verbs/ibverbs_windows.h"
#include "verbs/ibverbs_wire.h"
#include "verbs/options.h"

namespace dreplay::verbs::ibverbs {

// An open device with its protection domain, port and GID. Shared (by
// shared_ptr) by the provider and everything made from it, so the PD and the
// context are released after the last QP and MR, whatever order the caller
// destroys things in. Constant after construction.
struct Device {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  std::string name;
  ibv_device_attr attr = {};
  int port = 1;
  ibv_port_attr port_attr = {};
  std::string ibdev_path;  // sysfs, for the GID type on old kernels
  int gid_index = 0;
  // The GID at gid_index when the device was opened; a connection uses what
  // the entry holds at its setup (CurrentGid).
  ibv_gid gid = {};
  std::string gid_type;                     // "RoCE v2", "RoCE v1", "IB"
  GidKind gid_kind = GidKind::kInfiniBand;  // the same, as sent to peers
  uint8_t traffic_class = 0;                // ProviderOptions::traffic_class, for every GRH
  // The queue pairs' asynchronous faults (thread-safe; the one member that
  // changes after OpenDevice).
  FaultRegistry faults;
  // The memory windows bound on the device, owned by their queue pair and
  // their region alike (thread-safe; ibverbs_windows.h).
  WindowTable windows;
  // The libibverbs calls of queue pairs on this device (a fake in tests).
  IbvApi* api = RealIbvApi();

  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device();

  bool is_ethernet() const { return port_attr.link_layer == IBV_LINK_LAYER_ETHERNET; }
  bool has_atomics() const { return attr.atomic_cap != IBV_ATOMIC_NONE; }
  // "mlx5_0:1 gid[3] ::ffff:10.0.0.1 (RoCE v2)".
  std::string Describe() const;
};

// Opens the device that `options` names, or the first with an active port
// (options must pass Validate()). Errors as CreateIbverbsProvider's
// (ibverbs_provider.h). Blocking (device queries).
absl::StatusOr<std::shared_ptr<Device>> OpenDevice(const ProviderOptions& options);

// What `attr` (ibv_query_device) and `transport` lack of what dreplay's
// protocol needs, one phrase each; empty when the device can serve it:
// the InfiniBand or RoCE transport (iWARP's siw has no windows), and type-2
// memory windows (IBV_DEVICE_MEM_WINDOW_TYPE_2B and max_mw > 0; rxe before
// 5.14 has none), which carry every key the server grants. The protocol
// uses neither atomics nor WRITE_WITH_IMM; those are checked where a caller
// asks for them (RegisterMemory, PostSend).
std::vector<std::string> MissingCapabilities(const ibv_device_attr& attr,
                                             ibv_transport_type transport);

// What GID table entry gid_index holds now, and its kind: what the device
// puts in the packets of a queue pair set up now. A GID changes with its
// interface's address (IBV_EVENT_GID_CHANGE), so each connection's setup
// reads it again. kUnavailable when the entry is empty (its address was
// removed), naming the device and index. Blocking (one query).
absl::StatusOr<std::pair<ibv_gid, GidKind>> CurrentGid(const Device& device);

// The GID in IPv6 text form ("?" if it cannot be printed).
std::string GidToString(const ibv_gid& gid);
bool GidIsZero(const ibv_gid& gid);
// The path MTU in bytes.
int MtuBytes(ibv_mtu mtu);

}  // namespace dreplay::verbs::ibverbs

#endif  // DREPLAY_VERBS_IBVERBS_DEVICE_H_
