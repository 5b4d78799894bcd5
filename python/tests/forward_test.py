"""The clients of a Python learner that keeps its own replay memory, and of
a Python actor's stats, against real replay_server processes: the learner
placement's forward reader (every transition, in order), the hybrid
placement's (each transition once, as a server started with --forward
chose), and the actor stats publisher."""

import gc
import sys

import numpy as np
import pytest

import dreplay
from replay_service import ReplayService, wait_until

WAIT_S = 20.0
SENT = 64


def connect(service, role, **kwargs):
    gc.collect()  # an earlier session of the same actor id must be gone
    token_file = (service.credential_file(kwargs.get("actor_id", 0)) if role == "actor"
                  else service.token_file)
    return dreplay.connect(service.address, role=role, token_file=token_file,
                           provider="soft", **kwargs)


def send(service, count, seed):
    """Writes `count` transitions through actor 0; returns their observations."""
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((count, 4)).astype(np.float32)
    actor = connect(service, "actor", actor_id=0)
    writer = actor.experience_writer(max_batch=16)
    writer.append_transitions(observations=obs, actions=rng.integers(0, 2, count),
                              rewards=np.ones(count, np.float32), next_observations=obs + 1,
                              dones=np.zeros(count, bool),
                              priorities=np.arange(1, count + 1, dtype=np.float32))
    writer.flush()
    return obs


def collect(reader, count):
    got = []
    def more():
        got.append(reader.next(timeout_s=0.2))
        return sum(len(g["sequences"]) for g in got) >= count
    wait_until(more, WAIT_S, "forwarded transitions")
    return {k: np.concatenate([g[k] for g in got]) for k in got[0]}


def test_the_learner_placement_reads_every_transition_in_order():
    with ReplayService(capacity=256, leases=2) as service:
        learner = connect(service, "learner", placement="learner")
        reader = learner.forward_reader()
        assert reader.kind == "journal"
        obs = send(service, SENT, seed=3)
        got = collect(reader, SENT)
        np.testing.assert_array_equal(got["sequences"], np.arange(SENT))
        np.testing.assert_array_equal(got["observations"], obs)
        np.testing.assert_array_equal(got["next_observations"], obs + 1)
        np.testing.assert_array_equal(got["initial_priorities"], np.arange(1, SENT + 1))
        assert np.all(got["insert_time_ns"] > 0)
        wait_until(lambda: reader.next(timeout_s=0.05) is not None
                   and reader.server_ingested == SENT, WAIT_S, "the server's ingest cursor")
        assert reader.stats()["transitions"] == SENT


def test_the_hybrid_placement_reads_each_transition_once():
    with ReplayService(capacity=256, leases=2, extra_flags=["--forward=priority"]) as service:
        learner = connect(service, "learner", placement="hybrid")
        reader = learner.forward_reader()
        assert reader.kind == "forwarded_batches"
        obs = send(service, SENT, seed=4)
        got = collect(reader, SENT)
        assert len(got["sequences"]) == SENT
        np.testing.assert_array_equal(got["sequences"], np.arange(SENT))
        # Each transition once, in the server's order (by priority).
        assert sorted(map(tuple, got["observations"])) == sorted(map(tuple, obs))
        assert reader.next(timeout_s=0.2)["sequences"].size == 0
        stats = reader.stats()
        assert stats["transitions_fetched"] == stats["distinct_transitions_fetched"] == SENT
        # The server measured where what it forwarded sat in its priority
        # distribution (one batch per 50 ms: at least the first).
        server = connect(service, "monitor").stats_reader().read_stats()
        assert server["forward_dropped"] == 0
        assert server["crossing_percentile_count"] > 0
        mean = server["crossing_percentile_sum"] / server["crossing_percentile_count"]
        assert 0 <= mean <= 100
        # The buffer placement's reader refuses this server, and says why
        # (one learner at a time: this one goes first).
        del reader, learner
        buffer_learner = connect(service, "learner")
        with pytest.raises(dreplay.Error, match="placement=.hybrid"):
            buffer_learner.batch_reader()
        with pytest.raises(ValueError, match="learner and hybrid"):
            buffer_learner.forward_reader()


def test_the_hybrid_placement_needs_a_forwarding_server():
    with ReplayService(capacity=256, leases=2) as service:
        learner = connect(service, "learner", placement="hybrid")
        with pytest.raises(dreplay.Error, match="--forward=priority"):
            learner.forward_reader()
        with pytest.raises(ValueError, match="placement"):
            connect(service, "learner", placement="elsewhere")


def test_an_actor_publishes_its_line():
    with ReplayService(capacity=256, leases=2) as service:
        actor = connect(service, "actor", actor_id=1)
        stats = actor.actor_stats_publisher()
        stats.record_step(10)
        stats.record_episode(3.0)
        stats.record_episode(5.0)
        stats.publish(7)
        monitor = connect(service, "monitor")
        lines = monitor.stats_reader().read_actors()
        line = [l for l in lines if l["actor_id"] == 1][0]
        assert line["env_steps"] == 10
        assert line["episodes"] == 2
        assert line["transitions"] == 7
        assert line["returns_sum"] == pytest.approx(8.0)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
