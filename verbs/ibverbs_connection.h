// Copyright dreplay authors.
//
// ibverbs_connection.h: connection setup of the ibverbs provider: the
// listener and Connect(), which create an RC queue pair, exchange its
// description with the peer over the TCP control channel (ibverbs_wire.h),
// and take it through INIT -> RTR -> RTS.
//
// QP attributes suit a long (~100 us RTT) link: ack timeout, retry and RNR
// values from QueuePairOptions (a warning for an ack timeout shorter than
// 12), path MTU min(both ports' active_mtu, 4096), a GRH with hop_limit > 1
// (routed RoCE v2), random initial PSNs. max_rd_atomic is the minimum of both
// sides' requests and of the devices' max_qp_rd_atom / max_qp_init_rd_atom.
//
// LinkModel and FaultOptions are soft provider features and are refused
// with kInvalidArgument.

#ifndef DREPLAY_VERBS_IBVERBS_CONNECTION_H_
#define DREPLAY_VERBS_IBVERBS_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "verbs/ibverbs_device.h"
#include "verbs/options.h"
#include "verbs/verbs.h"

namespace dreplay::verbs::ibverbs {

// Provider::Listen for the provider of `device`: listens on host:port for
// peers' hellos, which a connection manager (connection_manager.h) reads
// and checks (CheckPeerInfo) on its own thread. Accept and Shutdown may be
// called from any thread; the queue pair is created in
// PendingConnection::Accept only.
absl::StatusOr<std::unique_ptr<Listener>> Listen(std::shared_ptr<Device> device,
                                                 const std::string& host, uint16_t port);

// Provider::Connect for the provider of `device`: connects to a listener,
// sending `payload`; blocks up to options.connect_timeout. When it returns
// the queue pairs of both sides are in RTS.
absl::StatusOr<Connection> Connect(std::shared_ptr<Device> device, const std::string& host,
                                   uint16_t port, const std::string& payload,
                                   const QueuePairOptions& options);

}  // namespace dreplay::verbs::ibverbs

#endif  // DREPLAY_VERBS_IBVERBS_CONNECTION_H_
