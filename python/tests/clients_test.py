"""Round trips of every client of the dreplay package against a real
replay_server process, errors as Python exceptions, and the GIL released
while a call waits."""

import gc
import sys
import threading

import numpy as np
import pytest

import dreplay
from dreplay import params
from replay_service import TOKEN, ReplayService, wait_until

WAIT_S = 20.0


@pytest.fixture(scope="module")
def service():
    with ReplayService(batch_size=8, min_size_to_sample=8) as s:
        yield s


def connect(service, role, **kwargs):
    if role == "actor":
        # An earlier test's session of the same actor id may live on in a
        # reference cycle (a pytest.raises traceback holds its frame); the
        # server keeps a connected actor's lease, so collect it first.
        gc.collect()
    token_file = (service.credential_file(kwargs.get("actor_id", 0)) if role == "actor"
                  else service.token_file)
    return dreplay.connect(service.address, role=role, token_file=token_file,
                           provider="soft", **kwargs)


def transitions(count, seed):
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((count, 4)).astype(np.float32)
    return dict(observations=obs, actions=rng.integers(0, 2, count),
                rewards=rng.standard_normal(count).astype(np.float32),
                next_observations=obs + 1, dones=rng.integers(0, 2, count).astype(bool),
                discounts=np.full(count, 0.99 ** 3, np.float32), steps=np.full(count, 3))


def test_transitions_round_trip_through_writer_reader_and_priorities(service):
    actor = connect(service, "actor", actor_id=0)
    learner = connect(service, "learner")
    monitor = connect(service, "monitor")
    assert learner.config["batch_size"] == 8
    assert learner.config["observation_size"] == 4

    sent = transitions(64, seed=1)
    writer = actor.experience_writer(max_batch=16)
    writer.append_transitions(**sent, priorities=np.ones(64, np.float32))
    writer.flush()
    assert writer.pending == 0
    assert writer.stats()["committed"] == 64

    stats_reader = monitor.stats_reader()
    wait_until(lambda: stats_reader.read_stats()["inserted"] >= 64, WAIT_S, "ingest")

    reader = learner.batch_reader()
    priorities = learner.priority_writer()
    rows = {tuple(o): i for i, o in enumerate(sent["observations"])}
    for _ in range(5):
        batch = reader.next(timeout_s=WAIT_S)
        assert batch.size == 8 and batch.decoded
        for j in range(batch.size):
            i = rows[tuple(batch.observations[j])]  # a transition that was sent
            assert batch.actions[j] == sent["actions"][i]
            assert batch.rewards[j] == sent["rewards"][i]
            assert batch.dones[j] == float(sent["dones"][i])
            np.testing.assert_array_equal(batch.next_observations[j], sent["next_observations"][i])
            assert batch.discounts[j] == pytest.approx(0.99 ** 3)
        assert batch.weights.dtype == np.float32 and np.all(batch.weights > 0)
        priorities.write(batch, np.full(batch.size, 2.0, np.float32))
    priorities.flush()
    assert priorities.stats()["updates"] == 5
    wait_until(lambda: stats_reader.read_stats()["priority_updates_applied"] >= 40, WAIT_S,
               "priority updates")
    assert reader.stats()["batches"] == 5
    assert actor.link_bytes()["total"] > 0


def test_raw_payloads_round_trip(service):
    actor = connect(service, "actor", actor_id=1)
    learner = connect(service, "learner")
    writer = actor.experience_writer()
    payload = np.arange(40, dtype=np.uint8)
    for _ in range(32):
        writer.append(payload.tobytes())
        writer.append(payload)  # a NumPy array: its bytes
    writer.flush()
    reader = learner.batch_reader(decode=False)
    batch = reader.next(timeout_s=WAIT_S)
    assert not batch.decoded
    # Earlier tests' transitions (52 bytes each) may be sampled too.
    assert set(int(n) for n in batch.lengths) <= {40, 52}
    for j in range(batch.size):
        if batch.lengths[j] == 40:
            assert batch.payload(j) == payload.tobytes()
    learner.priority_writer().write(batch, np.ones(batch.size))


def test_batches_as_torch_tensors_share_memory():
    torch = pytest.importorskip("torch")
    with ReplayService(batch_size=4, min_size_to_sample=4) as service:
        writer = connect(service, "actor").experience_writer()
        writer.append_transitions(**transitions(16, seed=2))
        writer.flush()
        learner = connect(service, "learner")
        reader = learner.batch_reader()
        batch = reader.next(timeout_s=WAIT_S)
        tensors = batch.torch()
        assert tensors["observations"].shape == (4, 4)
        assert tensors["actions"].dtype == torch.int64
        tensors["rewards"][0] = 123.0  # no copy: the array sees it
        assert batch.rewards[0] == 123.0
        learner.priority_writer().write(batch, torch.ones(4))
        later = reader.next(timeout_s=WAIT_S)  # the batch's arrays stay valid
        assert batch.rewards[0] == 123.0 and later.batch_number == batch.batch_number + 1


def test_params_round_trip_as_bytes_and_state_dict(service):
    learner = connect(service, "learner")
    actor = connect(service, "actor", actor_id=0)
    publisher = learner.param_publisher()
    fetcher = actor.param_fetcher()
    v1 = publisher.publish(b"some parameters")
    assert fetcher.fetch_if_newer() == b"some parameters"
    assert fetcher.version == v1
    assert fetcher.fetch_if_newer() is None

    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = params.make_qnetwork(4, 2)
    v2 = publisher.publish_state_dict(net.state_dict())
    assert v2 == v1 + 1
    data = fetcher.fetch_if_newer()
    assert params.header(data)["version"] == v2
    copy = params.make_qnetwork(4, 2)
    assert params.load_state_dict(copy, data) == v2
    for a, b in zip(net.state_dict().values(), copy.state_dict().values()):
        assert torch.equal(a, b)
    with pytest.raises(dreplay.Error, match="network shape") as e:
        params.load_state_dict(params.make_qnetwork(4, 2, hidden=(32,)), data)
    assert e.value.code == "FAILED_PRECONDITION"


def test_stats_as_dicts(service):
    monitor = connect(service, "monitor")
    stats = monitor.stats_reader().read_stats()
    assert stats["capacity"] == 1024
    assert stats["monitors_connected"] >= 1
    assert isinstance(monitor.stats_reader().read_actors(), list)


def test_errors_carry_the_cpp_message(service):
    with pytest.raises(dreplay.Error, match="authentication failed") as e:
        dreplay.connect(service.address, role="learner", token="wrong-token-0123456789",
                        provider="soft", connect_timeout_s=2)
    assert e.value.code == "PERMISSION_DENIED"
    with pytest.raises(ValueError, match="--server=nohost"):
        dreplay.connect("nohost", role="learner")
    with pytest.raises(ValueError, match="role"):
        dreplay.connect(service.address, role="pilot")
    writer = connect(service, "actor").experience_writer()
    with pytest.raises(dreplay.InvalidArgumentError, match="exceeds the server's max payload"):
        writer.append(bytes(100000))
    monitor = connect(service, "monitor")
    with pytest.raises(dreplay.Error) as e:
        monitor.param_fetcher()
    assert e.value.code and e.value.message in str(e.value)


def test_prefetched_batches_come_in_order_and_the_thread_is_joined(service):
    # Earlier tests' transitions are in the memory.
    learner = connect(service, "learner")
    reader = learner.batch_reader()
    priorities = learner.priority_writer()
    threads = threading.active_count()
    numbers = []
    for batch in reader.prefetched(count=6, timeout_s=WAIT_S, ahead=2):
        assert batch.size == 8 and batch.decoded
        numbers.append(batch.batch_number)
        priorities.write(batch, np.ones(batch.size, np.float32))
    assert numbers == list(range(numbers[0], numbers[0] + 6))
    assert threading.active_count() == threads  # the reading thread was joined
    # Closed early, the generator stops its thread too; what it read ahead
    # is the reader's, not answered.
    batches = reader.prefetched(timeout_s=WAIT_S, ahead=1)
    first = next(batches)
    priorities.write(first, np.ones(first.size, np.float32))
    batches.close()
    assert threading.active_count() == threads
    with pytest.raises(ValueError):
        next(reader.prefetched(ahead=0))


def test_prefetched_makes_the_device_tensors_on_its_thread(service):
    # No GPU here: torch's "meta" device stands in for one (tensors with a
    # shape and no data), which is enough to see where they were made.
    torch = pytest.importorskip("torch")
    learner = connect(service, "learner")
    reader = learner.batch_reader()
    priorities = learner.priority_writer()
    made_on = {}
    original = dreplay.Batch.torch

    def recording(batch, device=None):
        made_on.setdefault(batch.batch_number, threading.current_thread().name)
        return original(batch, device)

    dreplay.Batch.torch = recording
    try:
        for batch in reader.prefetched(count=3, timeout_s=WAIT_S, device="meta"):
            tensors = batch.torch("meta")
            assert tensors["observations"].device.type == "meta"
            assert tensors["observations"].shape == (batch.size, 4)
            # Made once, on the reading thread; the loop gets the same ones.
            assert batch.torch("meta")["actions"] is tensors["actions"]
            assert made_on[batch.batch_number] == "dreplay-prefetch"
            priorities.write(batch, np.ones(batch.size, np.float32))
    finally:
        dreplay.Batch.torch = original
    assert len(made_on) == 3


def test_blocking_calls_release_the_gil():
    with ReplayService(min_size_to_sample=1000) as service:
        reader = connect(service, "learner").batch_reader()
        counter = [0]
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                counter[0] += 1

        thread = threading.Thread(target=spin)
        thread.start()
        try:
            before = counter[0]
            with pytest.raises(TimeoutError):
                reader.next(timeout_s=1.0)  # nothing is staged: waits the whole second
            during = counter[0] - before
        finally:
            stop.set()
            thread.join()
        # With the GIL held for that second the other thread could not have
        # run at all; with it released it counts freely.
        assert during > 10000, during


def test_environment_steps_like_gymnasium():
    env = dreplay.make_environment("CartPole-v1")
    assert (env.observation_size, env.action_count, env.max_episode_steps) == (4, 2, 500)
    obs = env.reset(seed=3)
    assert obs.dtype == np.float32 and obs.shape == (4,)
    steps = 0
    while True:
        obs, reward, terminated, truncated = env.step(steps % 2)
        steps += 1
        assert reward == 1.0
        if terminated or truncated:
            break
    with pytest.raises(dreplay.Error, match="FAILED_PRECONDITION"):
        env.step(0)
    assert "CartPole-v1" in dreplay.environment_names()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
