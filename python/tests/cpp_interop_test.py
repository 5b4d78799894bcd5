"""Python and the C++ binaries agree: a C++ actor loads the parameters a
Python learner publishes (a state_dict in the params format), and the
Python batch reader decodes the transitions a C++ actor inserts."""

import sys

import numpy as np
import pytest

import dreplay
from dreplay import params
from replay_service import ReplayService, wait_until

WAIT_S = 30.0


def read_log(path):
    with open(path, errors="replace") as f:
        return f.read()


def test_cpp_actor_loads_python_parameters_and_python_reads_its_transitions():
    torch = pytest.importorskip("torch")
    with ReplayService(batch_size=16, min_size_to_sample=16) as service:
        learner = dreplay.connect(service.address, role="learner",
                                  token_file=service.token_file, provider="soft")
        publisher = learner.param_publisher()
        torch.manual_seed(0)
        net = params.make_qnetwork(4, 2, hidden=(64, 64))  # the actor's default --hidden
        version = publisher.publish_state_dict(net.state_dict())

        actor, log_path = service.start_actor(
            extra_flags=["--param_refresh_steps=10", "--max_steps_per_s=2000"])
        wait_until(lambda: "first parameters (version %d)" % version in read_log(log_path) or
                   actor.poll() is not None, WAIT_S, "the actor to load the parameters")
        assert actor.poll() is None, read_log(log_path)

        reader = learner.batch_reader()
        priorities = learner.priority_writer()
        for _ in range(3):
            batch = reader.next(timeout_s=WAIT_S)
            assert batch.decoded and batch.size == 16
            assert np.all(np.isin(batch.actions, [0, 1]))
            assert np.all((batch.discounts > 0) & (batch.discounts <= 1))
            assert np.all(batch.rewards > 0)  # CartPole: +1 per step
            priorities.write(batch, np.ones(batch.size, np.float32))
        assert actor.poll() is None, read_log(log_path)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
