// Copyright dreplay authors.
//
// provider.h: the software provider: verbs.h's RC semantics over TCP (or
// shared memory with a peer on the same host), for hosts without an RDMA
// device, with a link emulator and fault injection.
//
//   auto provider = CreateSoftProvider(ProviderOptions{});
//   auto mr = (*provider)->RegisterMemory(buf, n, kLocalWrite | kRemoteRead);
//   auto listener = (*provider)->Listen("127.0.0.1", 0);
//
// How it works:
//  * Each provider runs one thread, its "NIC" (nic.h), that serves the
//    TCP connections of all its queue pairs. As responder it checks every
//    request's rkey, bounds and access flags against the provider's table of
//    registered regions (region_table.h) and executes WRITE, READ and
//    atomics directly on the registered memory; no application code runs.
//    An application thread whose Poll finds no completion does the same
//    work for its own queue pair when it is idle (channel.h). Requests of
//    one queue pair are executed in order; atomics are atomic across all
//    queue pairs of the provider (__atomic operations on the word).
//  * rkeys are random 32-bit values from a cryptographically seeded
//    generator, never counters; lkey == rkey.
//  * Outstanding READs + atomics per queue pair are limited to the
//    negotiated max_rd_atomic (min of both sides); further READs wait in the
//    send queue, so the credit limit of a long link shows as with a NIC. A
//    peer that exceeds it gets kRemoteInvalidRequest.
//  * WRITE_WITH_IMM consumes a posted receive at the target (kRecv
//    completion there); none posted: the requester gets kRnrRetryExceeded at
//    once (no RNR retries).
//  * A failed request kills its queue pair on both sides (the peer's
//    outstanding requests then complete with kRetryExceeded or kFlushed);
//    every other queue pair and the process carry on. Any garbage from a
//    peer, in setup or later, ends only that connection.
//  * QueuePairOptions::link (the connecting side's, sent in setup) delays the
//    frames of both directions (link.h; the loopback path's own
//    latency is allowed for, so measured round trips match the model).
//    Queue pairs between the same two providers with the same model share
//    one link (link_table.h), so together they get its bandwidth once. A
//    link slower than soft::kMinLinkBandwidthGbps is refused.
//  * QueuePairOptions::faults injects drops, stalls and torn WRITEs into
//    the requests of the side that sets them. kPrefix places the first half
//    of the WRITE and drops the connection; kOutOfOrder places the second
//    half, then the first half `stall_for` later (10 ms when zero), and the
//    WRITE completes normally. drop_after_bytes may cut a WRITE short: the
//    peer then holds a partial placement, as after a link failure.
//  * Same-host transport (ProviderOptions::soft_transport = kAuto, the
//    default): when both ends run on one host (and network namespace) as
//    the same user (or root), setup links them by a Unix socket
//    (shm_link.h), and a WRITE or READ on memory that the target allocated
//    as verbs::ShareableMemory is executed by the requester itself on a
//    mapping of the target's memfd segments: no responder CPU, no socket
//    I/O (shared_path.h). The peer hands a mapping only for a key the
//    requester uses (a window of that queue pair or a region key), only
//    when the key's range is made of whole segments, writable only under a
//    key that grants WRITE, READ-only only over segments sealed
//    (F_SEAL_FUTURE_WRITE) against writable mappings. Everything else
//    (atomics, WRITE_WITH_IMM, plain memory, partial segments, requests
//    outside a mapped range, queue pairs with `faults`) goes over TCP,
//    which stays the authority: what it refuses is refused as before. RC
//    order holds: a request takes the mapping only when none of its queue
//    pair is outstanding on TCP, and completions leave in posting order.
//    With a link model a mapped request's completion is released no
//    earlier than the model says (the request on this side's shared link
//    direction, the answer on a per-queue-pair emulator of the other
//    direction), though its data lands (or is read) when it is posted. The
//    bytes count in traffic() on both sides as over TCP (the target reads
//    the requester's counts from a shared page). A deregistered region's
//    mappings are revoked by a frame, so a request posted before the
//    revocation arrives may still land in that (unregistered) memory; a
//    queue pair that fails drops every mapping of its peer.
//    Revocation as a device's: when a queue pair fails or is destroyed,
//    the target renews the segments it granted writable on it (fresh
//    memfds holding the same bytes at the same addresses; shared_path.h,
//    "Revocation"), so nothing its peer writes through the old mappings
//    afterwards reaches the target, as nothing reaches it through a
//    destroyed queue pair's memory windows; and the target marks its side
//    closed on the shared page first, so the requester executes nothing
//    more on its mappings (a READ would still see the old memory) and its
//    later requests fail over TCP as a device's would. A segment is granted writable
//    to one queue pair at a time (another asking keeps TCP). The requester
//    maps only grants that answer its own asks, bounded in size
//    (kMaxGrantBytes), and never waits for their fds.
//    Security: that defends against stale and displaced sessions, not a
//    hostile process of the same user, which can read and write the
//    target's memory anyway (ptrace, /proc/<pid>/mem), and while its queue
//    pair lives can write anywhere in the segments behind its writable
//    keys. Where same-host peers of the same user are not trusted, run
//    with --soft_transport=tcp (SoftTransport::kTcp). A fault-injecting
//    TCP proxy cannot see mapped operations either: runs through one need
//    kTcp too.
//  * Emulated links (QueuePairOptions::link): frames wait for their
//    modelled arrival time at the receiver when both ends read the same
//    clock (wire.h, "Receiver-released frames"), else at the sender
//    (link.h); ProviderOptions::soft_link_release = kSender forces the
//    latter.
//  * Setup: the connector sends a hello with its payload; the listener's
//    connection manager (verbs/connection_manager.h) reads it, and the
//    application accepts or rejects it. Payloads are limited to
//    soft::kMaxSetupPayload; a peer must finish its hello within 5 s. The
//    channel, its link and the queue pair are made only in
//    PendingConnection::Accept.
//
// Lifetimes: memory regions, listeners and queue pairs may outlive the
// provider; destroying the provider joins the NIC thread, and the queue
// pairs still open move to the error state. Destroying a queue pair closes
// its connection; destroying a memory region kills the queue pairs that are
// still using it.
//
// Thread safety: as verbs.h states. Listener::Accept calls are serialised;
// Listener::Shutdown may be called from any thread.

#ifndef DREPLAY_VERBS_SOFT_PROVIDER_H_
#define DREPLAY_VERBS_SOFT_PROVIDER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "verbs/options.h"
#include "verbs/verbs.h"

namespace dreplay::verbs {

// Creates a soft provider and starts its NIC thread. options.kind is not
// looked at (CreateProvider picks the provider). kInvalidArgument when
// options fail Validate(); kInternal when the thread's epoll set cannot be
// created.
absl::StatusOr<std::unique_ptr<Provider>> CreateSoftProvider(const ProviderOptions& options);

}  // namespace dreplay::verbs

#endif  // DREPLAY_VERBS_SOFT_PROVIDER_H_
