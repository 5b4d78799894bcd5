"""dreplay.connect([...]): one Python learner over two real replay_server
processes (edge sites). Node 0's transitions carry observation[0] = 0 and
priority 3, node 1's observation[0] = 1 and priority 1, so node 0 holds
more of the priority mass: exact sampling takes each node's rows in
proportion to its mass, the weights are global importance-sampling weights,
each row's priority goes back to its node, parameters reach both nodes,
and each row carries its policy lag (versions published minus the one its
actor acted with). Round robin takes half the rows from each."""

import gc
import sys

import numpy as np
import pytest

import dreplay
from replay_service import ReplayService

ROWS = 64
BATCHES = 120


def fill(service, node, priority, params_version=0):
    gc.collect()
    actor = dreplay.connect(service.address, role="actor", actor_id=0, provider="soft",
                            token_file=service.credential_file(0))
    rng = np.random.default_rng(node)
    obs = rng.standard_normal((ROWS, 4)).astype(np.float32)
    obs[:, 0] = node
    writer = actor.experience_writer(max_batch=16)
    writer.set_params_version(params_version)
    writer.append_transitions(observations=obs, actions=rng.integers(0, 2, ROWS),
                              rewards=np.ones(ROWS, np.float32), next_observations=obs,
                              dones=np.zeros(ROWS, bool),
                              discounts=np.full(ROWS, 0.99 ** 3, np.float32),
                              steps=np.full(ROWS, 3), priorities=np.full(ROWS, priority,
                                                                         np.float32))
    writer.flush()
    return actor


@pytest.fixture(scope="module")
def sites():
    with ReplayService(batch_size=8, min_size_to_sample=8) as a, \
            ReplayService(batch_size=8, min_size_to_sample=8) as b:
        # Node 1's actor says it acted with version 1 of the parameters.
        actors = [fill(a, 0, 3.0), fill(b, 1, 1.0, params_version=1)]
        yield a, b, actors


def learner(sites, policy):
    a, b, _ = sites
    # A server takes one learner at a time: an earlier test's is let go.
    gc.collect()
    return dreplay.connect([a.address, b.address], token_file=a.token_file, provider="soft",
                           shard_policy=policy)


def train(nodes, batches):
    """Draws `batches` batches, answering each row with its node's priority
    (so the masses stay); returns the share of rows from node 0 and the
    batches."""
    from_0 = rows = 0
    seen = []
    for batch in nodes.batches(count=batches, timeout_s=20):
        node = batch.observations[:, 0]
        assert set(np.unique(node)) <= {0.0, 1.0}
        from_0 += int(np.sum(node == 0))
        rows += batch.size
        nodes.write_priorities(np.where(node == 0, 3.0, 1.0))
        seen.append(batch)
    return from_0 / rows, seen


def test_exact_sampling_over_two_nodes_follows_their_mass(sites):
    nodes = learner(sites, "exact")
    assert nodes.batch_size == 8
    share, batches = train(nodes, BATCHES)
    info = nodes.nodes()
    assert [n["rows"] for n in info] == [round(share * BATCHES * 8),
                                         round((1 - share) * BATCHES * 8)]
    mass = info[0]["mass_share"]
    assert 0.6 < mass < 0.8, info  # 3^alpha : 1 per transition, as many of each
    # 960 rows: the binomial sd of the share is below 0.016.
    assert abs(share - mass) < 0.07, (share, info)
    assert nodes.tv_distance() < 0.05
    for batch in batches:
        w = batch.weights
        assert w.shape == (batch.size,) and np.all(w > 0) and np.all(w <= 1)
        assert np.isclose(w.max(), 1.0)
        # Global weights: a row of the lighter node (lower p) weighs more.
        node = batch.observations[:, 0]
        if np.any(node == 0) and np.any(node == 1):
            assert w[node == 1].min() > w[node == 0].max()
        # Node 0's actor gave no version; node 1's acted with version 1,
        # and the learner has published none yet: unknown for both.
        assert np.all(batch.policy_lag == -1)
        assert batch.batch_number is None
    assert all(n["inserts_per_s"] is None or n["inserts_per_s"] >= 0 for n in info)


def test_round_robin_takes_the_nodes_in_turn(sites):
    nodes = learner(sites, "round_robin")
    share, _ = train(nodes, 40)
    assert share == pytest.approx(0.5, abs=0.001)


def test_parameters_reach_every_node(sites):
    a, b, _ = sites
    nodes = learner(sites, "exact")
    first = nodes.next(timeout_s=20)
    nodes.write_priorities(np.where(first.observations[:, 0] == 0, 3.0, 1.0))
    data = bytes(range(200))
    nodes.publish(data)
    nodes.publish(data)  # version 2 at both nodes
    # Node 1's rows acted with version 1: one version behind, once the
    # node batches fetched before the publication are used up (a lag is
    # taken when a node's batch is fetched); node 0's say nothing.
    train(nodes, 20)
    for batch in nodes.batches(count=20, timeout_s=20):
        node = batch.observations[:, 0]
        assert np.all(batch.policy_lag[node == 1] == 1), batch.policy_lag
        assert np.all(batch.policy_lag[node == 0] == -1), batch.policy_lag
        nodes.write_priorities(np.where(node == 0, 3.0, 1.0))
    lags = [n["policy_lag_mean"] for n in nodes.nodes()]
    assert lags[0] is None and 0 < lags[1] <= 1, lags
    for service in (a, b):
        gc.collect()
        actor = dreplay.connect(service.address, role="actor", actor_id=1, provider="soft",
                                token_file=service.credential_file(1))
        assert actor.param_fetcher().fetch_if_newer() == data


def test_bad_arguments_are_named(sites):
    a, b, _ = sites
    with pytest.raises(ValueError, match="learner in the buffer placement"):
        dreplay.connect([a.address, b.address], role="actor", token_file=a.token_file)
    with pytest.raises(ValueError, match="1 links for 2 servers"):
        dreplay.connect([a.address, b.address], token_file=a.token_file, links=["none"])
    with pytest.raises(dreplay.InvalidArgumentError, match="shard policy"):
        dreplay.connect([a.address, b.address], token_file=a.token_file, provider="soft",
                        shard_policy="nearest")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
