"""dreplay.connect() and the clients of a session.

A Session is one connection (one queue pair) to a replay server in one role.
Its clients share it: an actor's experience writer and parameter fetcher; a
learner's batch reader, priority writer, parameter publisher (and fetcher,
and actor lines); a monitor's stats reader. Calls on one session run one at
a time (a lock in the extension, taken with the GIL released); Python
threads may share a session. A client keeps its session alive.
"""

import queue
import threading

import numpy as np

from dreplay import _dreplay
from dreplay.batches import Batch


PLACEMENTS = ("buffer", "learner", "hybrid")


def connect(server, role="learner", token_file=None, provider="auto", link=None, *, token=None,
            actor_id=0, connect_timeout_s=10.0, learner_cache=None, insecure=False,
            placement="buffer", links=None, shard_policy="exact", node_timeout_s=1.0,
            node_start_timeout_s=30.0, seed=1):
    """Connects to the replay server at "HOST:PORT" as `role` ("actor",
    "learner" or "monitor"; an actor with `actor_id`), with the server's
    auth token from `token_file` (its first line, a file of mode 0600) or
    `token` (an actor: its own credential, dreplay.actor_credential);
    insecure=True instead for a server started with --insecure. `provider`:
    "auto", "ibverbs" or "soft"; `link` emulates a link on the soft provider
    ("10km-25g", "DELAY_US:GBPS", ...; None: none). Blocks (GIL released)
    up to connect_timeout_s, retrying while the server is unreachable.
    Raises dreplay.Error with the C++ status (PERMISSION_DENIED: refused,
    e.g. a bad token; UNAVAILABLE / DEADLINE_EXCEEDED: no server;
    INVALID_ARGUMENT: a bad argument, named). `learner_cache` (learners
    only; default: on for a learner) asks the server for transfer-once
    staging: each transition crosses the link at most once, as a reference
    afterwards; the batches are the same. learner_cache=False fetches every
    entry.

    `placement` (learners only) is where the learner's replay memory is:
    "buffer" (sampled at the buffer node: batch_reader() and
    priority_writer()), "learner" (at this learner, fed every transition in
    order: forward_reader()) or "hybrid" (at this learner, fed what a server
    started with --forward sends once each: forward_reader() too). The
    learner placement asks the server for the keys its reader needs; the
    hybrid placement needs a forwarding server, and the buffer placement one
    that does not forward (both checked when the reader is made).

    `server` a list of addresses: a learner over several buffer nodes (edge
    sites; buffer placement), returned as a MultiNodeSession. `links` gives
    each node's link (default `link` for all); `shard_policy` how batches
    are made: "exact" (each draw from node k with probability S_k / sum S:
    exact prioritized sampling over all of them), "first_ready" or
    "round_robin"; a node that stages nothing for node_timeout_s
    (node_start_timeout_s before its first batch) is passed over until it
    stages again (docs/edge-sites.md)."""
    if isinstance(server, (list, tuple)):
        return _connect_nodes(list(server), role, token_file, provider, link, token, links,
                              connect_timeout_s, learner_cache, insecure, placement,
                              shard_policy, node_timeout_s, node_start_timeout_s, seed)
    if links is not None:
        raise ValueError("links= is for several servers (a list)")
    if placement not in PLACEMENTS:
        raise ValueError("placement=%r: must be one of %s" % (placement, ", ".join(PLACEMENTS)))
    if placement != "buffer" and role != "learner":
        raise ValueError("placement=%r is for learners, not %s" % (placement, role))
    if learner_cache is None:
        learner_cache = role == "learner" and placement == "buffer"
    if learner_cache and placement != "buffer":
        raise ValueError("learner_cache is the buffer placement's")
    args = _dreplay.ConnectArgs()
    args.server = server
    args.role = role
    args.token = token or ""
    args.token_file = token_file or ""
    args.provider = provider
    args.link = link or "none"
    args.actor_id = actor_id
    args.connect_timeout_s = connect_timeout_s
    args.learner_cache = learner_cache
    args.insecure = insecure
    args.learner_placement = placement == "learner"
    return Session(_dreplay._connect(args), role, learner_cache, placement)


class _Batches:
    """next() and batches() over a native reader whose next() gives a
    batch's fields."""

    def next(self, timeout_s=30.0):
        """The next batch (a dreplay.Batch). Blocks up to timeout_s; raises
        dreplay.DeadlineExceededError (a TimeoutError) when none was staged
        (or, over several nodes, could be made) in time (call again)."""
        return Batch(self._native.next(timeout_s))

    def batches(self, count=None, timeout_s=30.0):
        """Yields `count` batches (None: forever)."""
        n = 0
        while count is None or n < count:
            yield self.next(timeout_s)
            n += 1


def _connect_nodes(servers, role, token_file, provider, link, token, links, connect_timeout_s,
                   learner_cache, insecure, placement, shard_policy, node_timeout_s,
                   node_start_timeout_s, seed):
    if not servers:
        raise ValueError("server=[]: give at least one address")
    if role != "learner" or placement != "buffer":
        raise ValueError("several servers are for a learner in the buffer placement, not "
                         "role=%r placement=%r" % (role, placement))
    if links is not None and len(links) != len(servers):
        raise ValueError("%d links for %d servers" % (len(links), len(servers)))
    args = _dreplay.MultiConnectArgs()
    args.servers = servers
    args.links = list(links or [])
    args.link = link or "none"
    args.token = token or ""
    args.token_file = token_file or ""
    args.provider = provider
    args.insecure = insecure
    args.connect_timeout_s = connect_timeout_s
    args.learner_cache = True if learner_cache is None else learner_cache
    args.shard_policy = shard_policy
    args.node_timeout_s = node_timeout_s
    args.node_start_timeout_s = node_start_timeout_s
    args.seed = seed
    return MultiNodeSession(_dreplay._connect_nodes(args))


class MultiNodeSession(_Batches):
    """A learner over several buffer nodes; make it with dreplay.connect([...]).

        nodes = dreplay.connect(["10.0.0.2:7471", "10.0.1.2:7471"], token_file="token.txt")
        for batch in nodes.batches(count=1000):
            td = train(batch.torch())            # weights: global IS weights
            nodes.write_priorities(td)           # each row's to its node
        nodes.publish(params)                    # to every node

    Batches are dreplay.Batch objects with the transitions' arrays, weights,
    insert_time_ns and policy_lag (versions published minus the actor's;
    -1: unknown); batch_number, epoch, incarnation and beta are None (a
    batch takes rows of several staged batches). Answer each batch with
    write_priorities() before the next."""

    def __init__(self, native):
        self._native = native

    @property
    def batch_size(self):
        return self._native.batch_size

    @property
    def transition_spec(self):
        return self._native.transition_spec

    def write_priorities(self, priorities):
        """The new priorities (|TD error|) of the last batch, one per row."""
        self._native.write_priorities(np.asarray(priorities, dtype=np.float32))

    def publish(self, data):
        """Publishes a params buffer (dreplay.params) to every node not away."""
        self._native.publish(bytes(data))

    def nodes(self):
        """One dict per node: server, rows, batches, taken_share, mass_share,
        priority_sum, passed_over, dropped, away, policy_lag_mean,
        inserts_per_s."""
        return self._native.nodes()

    def tv_distance(self):
        """The total-variation distance of the sampling so far from exact
        global prioritization (0 in expectation for "exact")."""
        return self._native.tv_distance()


class Session:
    """A connection to a replay server; make it with dreplay.connect()."""

    def __init__(self, native, role, learner_cache=False, placement="buffer"):
        self._native = native
        self.role = role
        self.placement = placement
        # Whether the server stages references for this learner
        # (connect(learner_cache=...)); batch readers follow it.
        self.learner_cache = learner_cache

    @property
    def config(self):
        """The server's published configuration (capacity, slot_size,
        max_payload, batch_size, staging_depth, observation_size,
        num_actions, param_bytes, transition_spec, ...), as a dict."""
        return self._native.config

    @property
    def epoch(self):
        return self._native.epoch

    def link_bytes(self):
        """Bytes this session moved across its link, by traffic class."""
        return self._native.link_bytes()

    def experience_writer(self, max_batch=32):
        return ExperienceWriter(_dreplay.ExperienceWriter(self._native, max_batch))

    def param_fetcher(self):
        return ParamFetcher(_dreplay.ParamFetcher(self._native))

    def batch_reader(self, depth=0, verify_slots=True, learner_cache=None, decode=True):
        """`decode`: decode every payload as an rl/transition.h transition
        (False for payloads of another encoding: the batch then has only
        payloads and lengths). `learner_cache` (default: as connected) keeps
        the transitions received, to resolve the entries the server stages
        as references; False on a session connected with the cache drops
        those entries."""
        if learner_cache is None:
            learner_cache = self.learner_cache
        return BatchReader(_dreplay.BatchReader(self._native, depth, verify_slots, learner_cache,
                                                decode))

    def forward_reader(self, policy="in_order", window=0, chunk_slots=256, chunks_in_flight=8,
                       depth=0, decode=True):
        """The transitions the server forwards, for a learner that keeps its
        own replay memory (placement "learner" or "hybrid"). Learner
        placement: every transition ingested, oldest first (`policy`
        "in_order"), or the newest `window` when behind ("freshest"), READ in
        chunks of `chunk_slots`. Hybrid placement: the batches a server
        started with --forward stages, each transition once (what crosses is
        the server's choice; `depth` batches READ ahead). See ForwardReader."""
        if self.placement == "buffer":
            raise ValueError("forward_reader() is for the learner and hybrid placements: "
                             "connect(..., placement=\"learner\" or \"hybrid\")")
        native = _dreplay.ForwardReader(self._native, self.placement == "hybrid", policy, window,
                                        chunk_slots, chunks_in_flight, depth, decode)
        return ForwardReader(native)

    def actor_stats_publisher(self):
        """An actor's line in the server's actors region: environment steps,
        episodes and returns, which the learner and monitors read."""
        return ActorStatsPublisher(_dreplay.ActorStatsPublisher(self._native))

    def priority_writer(self):
        return PriorityWriter(_dreplay.PriorityWriter(self._native))

    def param_publisher(self):
        return ParamPublisher(_dreplay.ParamPublisher(self._native))

    def stats_reader(self):
        return StatsReader(_dreplay.StatsReader(self._native))


class ExperienceWriter:
    """Inserts transitions (actor_client/experience_writer.h)."""

    def __init__(self, native):
        self._native = native

    def append(self, data, priority=0.0):
        """Appends one payload: bytes, or a contiguous NumPy array (its raw
        bytes), at most config["max_payload"] bytes. `priority` <= 0: the
        server gives it the current maximum. Flushes (blocking) when
        max_batch are pending."""
        self._native.append(data, float(priority))

    def append_transitions(self, observations, actions, rewards, next_observations, dones,
                           discounts=None, steps=None, priorities=None):
        """Encodes B transitions (rl/transition.h; the C++ learner and the
        Python batch reader decode them) from arrays: observations and
        next_observations [B, m] float32, actions [B] int, rewards [B],
        dones [B] bool (terminated), discounts [B] (gamma^steps; default 1),
        steps [B] (default 1), priorities [B] (default: the server's
        maximum), and appends them."""
        self._native.append_transitions(
            np.asarray(observations, np.float32), np.asarray(actions, np.int32),
            np.asarray(rewards, np.float32), np.asarray(next_observations, np.float32),
            np.asarray(dones, bool),
            None if discounts is None else np.asarray(discounts, np.float32),
            None if steps is None else np.asarray(steps, np.int32),
            None if priorities is None else np.asarray(priorities, np.float32))

    def set_params_version(self, version):
        """The version of the parameters the actor acts with (ParamFetcher.version),
        sealed into each transition appended from now on, so that the
        learner measures its policy lag."""
        self._native.set_params_version(version)

    def flush(self):
        """Inserts what is pending; blocks until committed."""
        self._native.flush()

    @property
    def pending(self):
        return self._native.pending

    def stats(self):
        return self._native.stats()


class BatchReader(_Batches):
    """Reads the batches the server pre-sampled (learner_client/batch_reader.h)."""

    def __init__(self, native):
        self._native = native

    def __iter__(self):
        return self.batches()

    def prefetched(self, count=None, timeout_s=30.0, ahead=2, device=None):
        """Yields `count` batches (None: forever), as batches() does, while a
        thread of its own reads up to `ahead` more (the READs, the copies,
        decompression and CPU assembly, all without the GIL), so that they
        stay off the training loop's critical path. Batches come in order;
        answer each with PriorityWriter.write as usual, and keep `ahead`
        below the server's staging_depth (the server stages no further
        ahead of the updates). The thread stops and is joined when the
        generator is closed or exhausted (a read in progress first ends,
        within timeout_s); its errors are raised here, in order.

        With `device` (a torch device, for a reader that decodes), the
        thread also makes each batch's tensors there (Batch.torch(device):
        through page-locked memory for CUDA, without blocking), so that the
        loop's batch.torch(device) returns them at once."""
        if ahead < 1:
            raise ValueError("ahead=%r: at least 1" % (ahead,))
        if device is not None:
            import torch  # only the device option needs torch
            device = torch.device(device)
        out = queue.Queue(maxsize=ahead)
        stop = threading.Event()

        def read():
            n = 0
            while not stop.is_set() and (count is None or n < count):
                try:
                    batch = self.next(timeout_s)
                    if device is not None:
                        batch.torch(device)  # kept on the batch
                    item = (batch, None)
                except Exception as e:  # handed to the consumer, in order
                    item = (None, e)
                while not stop.is_set():
                    try:
                        out.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        pass
                if item[1] is not None:
                    return
                n += 1

        thread = threading.Thread(target=read, name="dreplay-prefetch", daemon=True)
        thread.start()
        try:
            n = 0
            while count is None or n < count:
                batch, error = out.get()
                if error is not None:
                    raise error
                yield batch
                n += 1
        finally:
            stop.set()
            thread.join()

    def stats(self):
        return self._native.stats()


class ForwardReader:
    """Transitions forwarded to a learner that keeps its own replay memory;
    make it with Session.forward_reader().

        reader = learner.forward_reader()
        while training:
            got = reader.next(timeout_s=0.01)
            for i in range(len(got["sequences"])):
                memory.add(got["observations"][i], got["actions"][i], ...,
                           priority=got["initial_priorities"][i])

    next() returns a dict of arrays Python owns, one row per transition:
    "sequences" (arrival order, increasing), "leases" and "lease_sequences"
    (where it was written), "initial_priorities" (the actor's; 0: none),
    "insert_time_ns", "payloads" [n, max_payload] with "lengths", and with
    decode=True the transition's columns as Batch has them
    ("observations", "actions", "rewards", "discounts", "dones",
    "next_observations"). `server_ingested` is the server's ingest cursor as
    last READ: the transitions the actors generated, for a replay ratio that
    counts what the forwarding left behind too."""

    def __init__(self, native):
        self._native = native

    def next(self, timeout_s=1.0):
        return self._native.next(timeout_s)

    @property
    def server_ingested(self):
        return self._native.server_ingested

    @property
    def kind(self):
        """"journal" (learner placement) or "forwarded_batches" (hybrid)."""
        return self._native.kind

    def stats(self):
        return self._native.stats()


class ActorStatsPublisher:
    """An actor's counts and returns, WRITTEN to its line of the server's
    actors region; make it with Session.actor_stats_publisher()."""

    def __init__(self, native):
        self._native = native

    def record_step(self, steps=1):
        self._native.record_step(steps)

    def record_episode(self, episode_return):
        self._native.record_episode(float(episode_return))

    def publish(self, transitions):
        """WRITEs the line now, with `transitions` committed so far."""
        self._native.publish(int(transitions))


class PriorityWriter:
    """Writes new priorities for a batch (learner_client/priority_writer.h).
    Every batch read must be answered, in order: the server reuses its
    staging slot only after its update."""

    def __init__(self, native):
        self._native = native

    def write(self, batch, priorities):
        """priorities: one per transition of `batch` (a NumPy array, a list,
        or a torch tensor on any device), e.g. |TD error|."""
        if hasattr(priorities, "detach"):
            priorities = priorities.detach().to("cpu").numpy()
        self._native.write(batch.batch_number, batch.epoch, batch.incarnation, batch.sequences,
                           batch.indices, np.asarray(priorities, np.float32))

    def flush(self):
        """Waits until every update written has been placed at the server."""
        self._native.flush()

    def stats(self):
        return self._native.stats()


class ParamPublisher:
    """Publishes parameters (learner_client/param_publisher.h): bytes, or a
    torch state_dict with dreplay.params."""

    def __init__(self, native):
        self._native = native

    def publish(self, data):
        """Publishes `data` (bytes) as the next version; blocks until readers
        can see it; returns the version."""
        return self._native.publish(bytes(data))

    def publish_if_idle(self, data):
        """Publishes unless a publication is still in flight (then returns
        False and publishes nothing)."""
        return self._native.publish_if_idle(bytes(data))

    def publish_state_dict(self, state_dict):
        """Publishes a Q-network's state_dict in the params format the C++
        actors load (dreplay.params); returns the version."""
        from dreplay import params  # imports torch lazily
        return self.publish(params.encode_state_dict(state_dict, self.version + 1))

    @property
    def version(self):
        return self._native.version


class ParamFetcher:
    """Fetches published parameters (actor_client/param_fetcher.h)."""

    def __init__(self, native):
        self._native = native

    def fetch_if_newer(self):
        """The parameters (bytes) when a version above version() is
        published, else None."""
        return self._native.fetch_if_newer()

    @property
    def version(self):
        return self._native.version

    def stats(self):
        return self._native.stats()


class StatsReader:
    """The server's counters and the actors' lines (client/stats_reader.h)."""

    def __init__(self, native):
        self._native = native

    def read_stats(self):
        """The stats region as a dict (monitor role)."""
        return self._native.read_stats()

    def read_actors(self):
        """Every published actor line, as dicts (monitor or learner role)."""
        return self._native.read_actors()
