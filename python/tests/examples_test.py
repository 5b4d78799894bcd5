"""Smoke runs of the examples: examples/python_learner.py trains a few
steps against a replay server and a C++ actor it starts (through
tools/launch/run_local.py's functions), and examples/python_actor.py inserts
transitions that the server ingests and a reader decodes."""

import os
import re
import subprocess
import sys

import pytest

import dreplay
from replay_service import ReplayService, binary, wait_until

RUN_TIMEOUT_S = 240.0
WAIT_S = 20.0


def workspace_root():
    if "TEST_SRCDIR" in os.environ:
        return os.path.join(os.environ["TEST_SRCDIR"], "dreplay")
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def run_example(name, args, tmp_path):
    env = dict(os.environ)
    # The directory that holds the dreplay package being tested.
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(dreplay.__file__)))
    path = os.path.join(workspace_root(), "examples", name)
    out = subprocess.run([sys.executable, path] + args, capture_output=True, text=True,
                         timeout=RUN_TIMEOUT_S, env=env, cwd=str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    summary = [line for line in out.stdout.splitlines() if "summary:" in line]
    assert summary, out.stdout + out.stderr
    return dict(re.findall(r"(\w+)=(\S+)", summary[-1]))


def test_python_learner_trains_against_the_cpp_server_and_actor(tmp_path):
    pytest.importorskip("torch")
    bin_dir = os.path.dirname(os.path.dirname(binary("replay_server/replay_server")))
    summary = run_example("python_learner.py", [
        "--train_steps=100", "--actors=1", "--actor_rate=2000", "--min_replay=200",
        "--eval_episodes=5", "--eval_interval_s=1", "--link=none", "--device=cpu",
        "--bin_dir=" + bin_dir, "--out_dir=" + str(tmp_path / "logs")], tmp_path)
    assert int(summary["train_steps"]) == 100
    assert int(summary["batches"]) == 100
    assert int(summary["params_version"]) >= 2  # the initial and the final network
    assert int(summary["env_steps"]) > 0


def test_python_learner_trains_minatar_with_the_cpp_actor_running_its_network(tmp_path):
    # The Python MinAtar network's parameters load into the C++ actor (the
    # run fails if the actor refuses them), and u8 transitions decode.
    pytest.importorskip("torch")
    bin_dir = os.path.dirname(os.path.dirname(binary("replay_server/replay_server")))
    summary = run_example("python_learner.py", [
        "--env=MinAtar/Breakout", "--train_steps=30", "--publish_every=10", "--actors=1",
        "--actor_rate=2000", "--min_replay=200", "--eval_episodes=2", "--eval_interval_s=1",
        "--link=none", "--device=cpu", "--bin_dir=" + bin_dir,
        "--out_dir=" + str(tmp_path / "logs")], tmp_path)
    assert int(summary["train_steps"]) == 30
    assert int(summary["params_version"]) >= 4
    assert int(summary["env_steps"]) > 0


def test_python_learner_trains_on_frames_stored_once_from_its_frame_cache(tmp_path):
    # pixels84 stacks with each frame stored once: the C++ actor writes frame
    # records and the learner gathers the stacks in its FrameCache.
    pytest.importorskip("torch")
    bin_dir = os.path.dirname(os.path.dirname(binary("replay_server/replay_server")))
    summary = run_example("python_learner.py", [
        "--env=MinAtar/Breakout", "--observation=pixels84", "--frame_stack=4",
        "--train_steps=10", "--batch_size=32", "--publish_every=5", "--actors=1",
        "--actor_rate=2000", "--min_replay=200", "--eval_episodes=0", "--link=none",
        "--device=cpu", "--bin_dir=" + bin_dir, "--out_dir=" + str(tmp_path / "logs")], tmp_path)
    assert int(summary["train_steps"]) == 10
    assert int(summary["batches"]) == 10
    assert int(summary["params_version"]) >= 3
    assert int(summary["env_steps"]) > 0


def test_python_actor_inserts_transitions_a_reader_decodes(tmp_path):
    pytest.importorskip("torch")
    with ReplayService(batch_size=16, min_size_to_sample=16) as service:
        summary = run_example("python_actor.py", [
            "--server=" + service.address, "--token_file=" + service.credential_file(0),
            "--steps=500", "--flush_batch=16"], tmp_path)
        committed = int(summary["committed"])
        assert 490 <= committed <= 500  # the last n-1 steps of an open episode wait
        monitor = dreplay.connect(service.address, role="monitor",
                                  token_file=service.token_file, provider="soft")
        stats = monitor.stats_reader()
        wait_until(lambda: stats.read_stats()["inserted"] == committed, WAIT_S, "ingest")
        learner = dreplay.connect(service.address, role="learner",
                                  token_file=service.token_file, provider="soft")
        batch = learner.batch_reader().next(timeout_s=WAIT_S)
        assert batch.size == 16
        assert ((batch.discounts > 0.96) & (batch.discounts <= 0.99)).all()  # gamma^1..3


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
