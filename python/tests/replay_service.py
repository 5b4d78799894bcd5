"""Test helper: the real replay_server (and actor) binaries as child
processes on loopback, with OS-chosen ports.

    with ReplayService(batch_size=8) as service:
        learner = dreplay.connect(service.address, role="learner", token_file=service.token_file)

The server's sizes come from `actor --print_layout` (CartPole-v1, n=3), so a
C++ actor started with start_actor() fits it. Binaries are found in Bazel's
runfiles (under `bazel test`), else in bazel-bin.
"""

import json
import os
import signal
import subprocess
import tempfile
import time

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
ENV = "CartPole-v1"
N_STEP = 3
GAMMA = 0.99
TOKEN = "python-test-token-0123456789"


def binary(relative):
    """The path of a binary of this workspace, e.g. "replay_server/replay_server"."""
    roots = []
    if "TEST_SRCDIR" in os.environ:
        roots.append(os.path.join(os.environ["TEST_SRCDIR"], "dreplay"))
    here = os.path.dirname(os.path.abspath(__file__))
    roots.append(os.path.join(here, "..", "..", "bazel-bin"))
    for root in roots:
        path = os.path.join(root, relative)
        if os.access(path, os.X_OK):
            return path
    raise FileNotFoundError("%s not built: bazel build it first" % relative)


def actor_layout():
    out = subprocess.run([binary("actor_client/actor"), "--print_layout", "--env=" + ENV,
                          "--n_step=%d" % N_STEP, "--gamma=%r" % GAMMA],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def write_secret(path, text):
    """A new file of mode 0600 (a token file) holding `text`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    return path


class ReplayService:
    """A replay_server child process (soft provider, 127.0.0.1, port 0)."""

    def __init__(self, capacity=1024, batch_size=8, staging_depth=4, min_size_to_sample=8,
                 leases=2, extra_flags=()):
        self.dir = tempfile.mkdtemp(prefix="dreplay-pytest-")
        self.token_file = write_secret(os.path.join(self.dir, "token.txt"), TOKEN)
        self.layout = actor_layout()
        port_file = os.path.join(self.dir, "port")
        self.log_path = os.path.join(self.dir, "server.log")
        argv = [
            binary("replay_server/replay_server"), "--listen=127.0.0.1:0",
            "--port_file=" + port_file, "--provider=soft",
            "--capacity=%d" % capacity, "--slot_size=%d" % self.layout["slot_size"],
            "--batch_size=%d" % batch_size, "--staging_depth=%d" % staging_depth,
            "--param_bytes=%d" % (self.layout["params_bytes"] + 1024),
            "--transition_spec=" + self.layout["transition_spec"],
            "--observation_size=%d" % self.layout["observation_size"],
            "--num_actions=%d" % self.layout["num_actions"],
            "--leases=%d" % leases, "--min_size_to_sample=%d" % min_size_to_sample,
            "--auth_token_file=" + self.token_file, "--stats_interval_s=0",
        ] + list(extra_flags)
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        self.children = []
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError("replay_server exited (%d): %s" % (self.process.returncode,
                                                                      self.log_tail()))
            try:
                with open(port_file) as f:
                    port = int(f.read().strip())
                break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError("replay_server did not listen in time")
            time.sleep(0.02)
        self.address = "127.0.0.1:%d" % port

    def credential_file(self, actor_id):
        """A file holding actor `actor_id`'s own credential."""
        path = os.path.join(self.dir, "actor-%d.credential" % actor_id)
        if not os.path.exists(path):
            import dreplay
            write_secret(path, dreplay.actor_credential(TOKEN, actor_id))
        return path

    def start_actor(self, actor_index=0, num_actors=1, extra_flags=()):
        """A C++ actor child process; returns (process, log path)."""
        log_path = os.path.join(self.dir, "actor-%d.log" % actor_index)
        log = open(log_path, "wb")
        argv = [binary("actor_client/actor"), "--server=" + self.address, "--provider=soft",
                "--actor_index=%d" % actor_index, "--num_actors=%d" % num_actors,
                "--env=" + ENV, "--n_step=%d" % N_STEP, "--gamma=%r" % GAMMA,
                "--auth_token_file=" + self.credential_file(actor_index)] + list(extra_flags)
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        self.children.append(process)
        return process, log_path

    def log_tail(self, lines=20):
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])

    def close(self):
        for p in self.children + [self.process]:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.children + [self.process]:
            try:
                p.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def wait_until(condition, timeout_s, what):
    """Polls `condition` until true; AssertionError naming `what` after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.01)
