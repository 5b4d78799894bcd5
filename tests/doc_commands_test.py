"""Documented commands run: every command line of a sh, bash or console block
in README.md, docs/*.md and protocol/README.md either runs here, in a scratch
directory with short durations, or is matched by a rule that says why not
(the test that runs it, or what it needs that a test cannot have). A new or
changed command that no rule matches fails the test, so the docs cannot show
a command nobody ran.

Commands run in document order, one scratch directory per document, so a
recipe's later lines see what its earlier ones made (a token, a server).
Before a command runs, the binaries' paths ($B/..., bazel-bin/...) become
the test's, a fixed port becomes one the OS chose (the server is started
with port 0 and a port file), and long durations become short ones.

The docs are read from the source tree (found through this file's real
path); tests/BUILD tags the test `external`, so its result is never cached.

    bazel test //tests:doc_commands_test
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import docs_drift_test  # noqa: E402  (doc_files, find_root, shell_lines)

COMMAND_TIMEOUT_S = 90
START_TIMEOUT_S = 30
SHELL_LANGUAGES = ("sh", "bash", "console")
DOC_PORT = "18515"  # the port the docs use


class Skip:
    def __init__(self, reason):
        self.reason = reason


class Run:
    """How to run a documented command. edits: (pattern, replacement) pairs
    applied to the command; background: leave it running for the commands
    after it (stopped at the end of the document); port_file / port_log:
    where it says the port it listens on, which then replaces the docs'
    port; alive_after_s: an interactive command, which passes when it is
    still running after this long; json: its stdout must be JSON."""

    def __init__(self, edits=(), background=False, port_file=None, port_log=False,
                 alive_after_s=0, json=False):
        self.edits = edits
        self.background = background
        self.port_file = port_file
        self.port_log = port_log
        self.alive_after_s = alive_after_s
        self.json = json


SHORT = "--duration_s=0.3 --warmup_s=0"

# (document, pattern matched from the start of the command, what to do).
# The first rule that matches decides.
RULES = [
    (None, r"bazel (build|test) ", Skip("builds or tests with Bazel: the test command's own job")),
    ("README.md", r"tools/test\.sh$", Skip("the test command itself")),
    ("README.md", r"tools/run_demo\.sh$",
     Skip("installs and builds with Bazel; //tests:e2e_learning_test runs its engine, "
          "tools/launch/run_local.py")),
    (None, r"export PYTHONPATH=", Run()),
    (None, r"/usr/bin/python3 examples/python_(learner|actor)\.py",
     Skip("//python:examples_test runs both examples")),
    ("docs/operations.md", r"B=", Run()),
    (None, r"openssl rand -hex 32 > \S+ && chmod 600 \S+$", Run()),
    (None, r"\$B/replay_server/actor_credentials |bazel-bin/replay_server/actor_credentials ",
     Run()),
    ("docs/operations.md", r"\$B/replay_server/replay_server --listen=127\.0\.0\.1:18515 --capacity",
     Run(edits=[(r"--listen=127\.0\.0\.1:18515", "--listen=127.0.0.1:0 --port_file=server.port"),
                (r"--checkpoint_dir=/tmp/dreplay-ckpt", "--checkpoint_dir=ckpt")],
         background=True, port_file="server.port")),
    ("docs/operations.md", r"\$B/actor_client/actor --print_layout ", Run(json=True)),
    ("docs/operations.md", r"\$B/actor_client/actor --server=", Run(background=True)),
    ("docs/operations.md", r"\$B/learner_client/learner --server=",
     Run(edits=[(r"$", " --duration_s=4 --min_replay_size=256")])),
    # The document starts one server: both nodes become it.
    ("docs/operations.md", r"\$B/tools/replay_top --servers=",
     Run(edits=[(r"127\.0\.0\.1:18516", "127.0.0.1:18515")], json=True)),
    ("docs/operations.md", r"\$B/tools/replay_top .*--once --json$", Run(json=True)),
    ("docs/operations.md", r"\$B/tools/replay_top ", Run(alive_after_s=2)),
    ("docs/operations.md", r"\$B/replay_server/replay_server .*\.\.\.$",
     Skip("its flags are elided (...)")),
    ("docs/operations.md", r"curl -s http://127\.0\.0\.1:9464/metrics",
     Skip("needs the server above, whose flags are elided; //replay_server:"
          "prometheus_metrics_test serves and scrapes the same page")),
    ("docs/benchmarks.md", r"bazel-bin/tools/bench/replay_bench ",
     Run(edits=[(r"--duration_s=\S+", "--duration_s=0.5")], json=True)),
    ("docs/benchmarks.md", r"tools/launch/run_local\.py .*--samples_per_insert SPI --seed SEED$",
     Skip("a sweep over placeholders; //tests:e2e_learning_test runs tools/launch/run_local.py")),
    ("docs/benchmarks.md", r"tools/run_demo\.sh --budget_s 450 --seed SEED$",
     Skip("installs and builds with Bazel; SEED is a placeholder")),
    ("docs/edge-sites.md", r"tools/launch/run_local\.py --buffer_nodes 2 ",
     Skip("a minute of CPU; //tests:edge_sites_test runs tools/launch/run_local.py "
          "--buffer_nodes 2 with each shard policy")),
    ("docs/edge-sites.md", r"sudo tools/launch/netns_cluster\.sh --sites 2 ",
     Skip("root and network namespaces; //tests:netns_cluster_test runs two sites")),
    (None, r"(/usr/bin/python3 )?tools/experiment/edge_sites\.py --out out/edge-sites",
     Skip("15 minutes; //tests:edge_sites_quick_test runs edge_sites.py --quick")),
    (None, r"(/usr/bin/python3 )?tools/experiment/edge_sites\.py ",
     Skip("//tests:edge_sites_quick_test runs edge_sites.py --quick")),
    ("docs/minatar.md", r"tools/run_demo\.sh --env MinAtar/Breakout$",
     Skip("installs and builds with Bazel; //tests:e2e_learning_test runs its engine on "
          "MinAtar/Breakout")),
    ("docs/minatar.md", r"tools/launch/run_local\.py --env MinAtar/Breakout --duration_s",
     Skip("//tests:e2e_learning_test runs a short MinAtar/Breakout run through it")),
    ("docs/minatar.md",
     r"tools/launch/run_local\.py --env MinAtar/Breakout --observation pixels84 ",
     Skip("about 1 GB of replay and minutes of CPU; pixels84 is tested without processes "
          "(//rl:minatar_games_test, //tests:print_layout_test)")),
    ("docs/minatar.md", r"PYTHONPATH=bazel-bin/python/lib /usr/bin/python3 "
     r"examples/python_learner\.py --env=MinAtar/Breakout$",
     Skip("//python:examples_test trains it on MinAtar/Breakout with a C++ actor")),
    ("docs/minatar.md", r"tools/experiment/experiment\.py --quick --env MinAtar/Breakout$",
     Skip("minutes of CPU; //tests:experiment_quick_test runs the quick set on CartPole-v1")),
    ("docs/minatar.md", r"tools/bench/minatar_bench\.py --json( --run_flag=--pin_cpus=0:1)?$",
     Skip("a 10-minute benchmark")),
    ("docs/minatar.md",
     r"tools/bench/minatar_curves\.py( --seeds [0-9,]+)? --run_flag=--pin_cpus=0:1$",
     Skip("an hour per game and seed; //tests:minatar_curves_test runs it for seconds")),
    ("docs/minatar.md", r"tools/bench/minatar_curves\.py --plot_only$",
     Skip("rewrites the committed curves; //tests:minatar_curves_test draws them from a "
          "result of its own")),
    ("docs/benchmarks.md", r"bazel-bin/tools/bench/frame_codec_bench --json$",
     Run(edits=[(r"$", " --frames_per_game=64 --batches_per_game=4 --min_cpu_s=0")], json=True)),
    ("docs/benchmarks.md", r"bazel-bin/tools/bench/frame_feed_bench ",
     Run(edits=[(r"$", " --trace_steps=256 --consume_rate=800 --samples_per_insert=4"
                 " --batch_size=32 --capacity=1024 --warmup_s=0.2 --window_s=0.5")],
         json=True)),
    ("docs/benchmarks.md", r"tools/bench/feed_sweep\.py (.* )?--json > \S+$",
     Skip("3 to 18 minutes; //tools/bench:feed_sweep_test runs it for seconds")),
    ("docs/benchmarks.md", r"tools/gpu_check\.sh( --smoke)?$",
     Skip("needs a GPU for its figures; //python:gpu_check_test runs its smoke mode")),
    ("docs/benchmarks.md", r"bazel-bin/tools/bench/peer_bench ",
     Skip("needs Redis and gRPC servers; //tools/bench:peer_bench_test runs every arm")),
    ("docs/roce.md", r"bazel-bin/tools/bench/verbs_bench --server --port=18515$",
     Run(edits=[(r"--port=18515", "--port=0")], background=True, port_log=True)),
    ("docs/roce.md", r"bazel-bin/tools/bench/verbs_bench --connect=hostA:18515 ",
     Run(edits=[(r"hostA:", "127.0.0.1:"), (r"$", " " + SHORT)], json=True)),
    ("docs/roce.md", r"bazel-bin/tools/bench/verbs_bench ", Run(edits=[(r"$", " " + SHORT)])),
    ("docs/roce.md", r"sudo tools/launch/softroce_setup\.sh",
     Skip("loads rdma_rxe on a host NIC: root and a kernel module")),
    ("docs/roce.md", r"ibv_devinfo ", Skip("needs an RDMA device")),
    ("docs/roce.md", r"tools/rxe_vm/rxe_vm\.sh ",
     Skip("tools/test.sh runs the VM suite after the Bazel tests")),
    ("docs/roce.md", r"sudo tools/launch/netns_cluster\.sh ",
     Skip("//tests:netns_cluster_test runs it (training, both benches, teardown)")),
    ("docs/benchmarks.md", r"tools/launch/netns_cluster\.sh --bench_only( --bench_flag \S+)+$",
     Skip("//tests:netns_cluster_test runs the bench across namespaces")),
    ("docs/benchmarks.md",
     r"sudo tools/launch/netns_cluster\.sh --bench_only --bench_tool (verbs|replay)_bench"
     r"( --bench_flag=\S+)+$",
     Skip("root and namespaces; //tests:netns_cluster_test runs both benches across them")),
    ("docs/benchmarks.md", r"sudo tools/bench/tcp_path_table\.py ",
     Skip("root, namespaces and minutes; //tools/bench:tcp_path_table_test runs it over "
          "loopback for seconds")),
    ("docs/roce.md", r"tools/launch/slurm/submit\.sh ",
     Skip("//tests:slurm_test submits the job to a Slurm cluster it starts")),
    ("docs/roce.md", r"(squeue --me|ls dreplay-JOBID/)$", Skip("inspects a submitted job")),
    ("docs/chaos.md", r"tools/chaos/chaos\.py ", Skip("//tests:chaos_test runs the soak")),
    ("docs/edge-sites.md", r"tools/chaos/chaos\.py --sites ",
     Skip("a 10-minute soak; //tests:chaos_test runs 45 s of it over two sites")),
    ("docs/chaos.md", r"tools/chaos/chaos_check\.py OUT_DIR$",
     Skip("OUT_DIR is a finished soak's; //tools/chaos:chaos_check_test runs the checker")),
    ("docs/experiment.md", r"tools/experiment/experiment\.sh --quick$",
     Skip("//tests:experiment_quick_test runs it")),
    ("docs/experiment.md", r"tools/experiment/experiment\.sh( --full| --ungoverned)?$",
     Skip("about 2.5 hours (8 with --full); --quick is the smoke run")),
    ("docs/experiment.md", r"tools/experiment/experiment\.py --cells rho2-u0\.25,rho8-u0\.25$",
     Skip("97 minutes; //tests:experiment_quick_test runs the quick set")),
    ("docs/experiment.md", r"tools/experiment/experiment\.py --env Acrobot-v1 --cells rho8-u0\.25 "
     r"--seeds 5 --out out/experiment-acrobot$",
     Skip("26 minutes; //tests:experiment_quick_test runs the quick set")),
    ("docs/experiment.md", r"tools/experiment/experiment\.py --cells rho8-u0\.25 --arms "
     r"hybrid,hybrid-aa --seeds 20 --out out/experiment-aa$",
     Skip("28 minutes; //tools/experiment:experiment_test checks what --arms runs")),
    ("docs/experiment.md", r"tools/experiment/experiment\.py --env Acrobot-v1 --cells "
     r"(rho0\.5-u8,rho8-u8|rho2-u0\.25) --seeds 5 --out out/experiment-acrobot --resume$",
     Skip("40 and 25 minutes; //tests:experiment_quick_test runs the quick set")),
    ("docs/experiment.md", r"tools/experiment/experiment\.py --cells rho2-u0\.25,rho8-u0\.25 --arms "
     r"\S+ --seeds 5 --out out/experiment-crossing-primary$",
     Skip("34 minutes; //tools/experiment:experiment_test checks what --arms runs")),
    ("docs/experiment.md", r"tools/experiment/experiment\.py --ungoverned --cells "
     r"(rho8-u0\.25|rho2-u0\.25) --arms \S+ --seeds 5 --out out/experiment-ungoverned(-rho2)?$",
     Skip("about 25 minutes; //tests:experiment_quick_test runs the quick set")),
    ("docs/experiment.md", r"tools/experiment/experiment\.py --resume$",
     Skip("54 minutes after the primary cells; //tools/experiment:experiment_test checks "
          "what --resume keeps apart")),
    ("docs/experiment.md", r"tools/experiment/experiment\.py --report_only --out out/experiment$",
     Skip("needs a finished run's summary; //tests:experiment_quick_test summarizes a run "
          "and rebuilds the report from summary.json alone")),
]


def commands(markdown):
    """(line number, command) for each logical line of the shell blocks:
    continuation lines joined, comments dropped."""
    return docs_drift_test.shell_lines(markdown, SHELL_LANGUAGES)


def rule_for(doc, command):
    for rule_doc, pattern, action in RULES:
        if (rule_doc is None or rule_doc == doc) and re.match(pattern, command):
            return action
    return None


def bin_dir(root):
    base = os.environ.get("TEST_SRCDIR")
    if base is None:  # by hand: the workspace's build
        opt = os.path.join(root, "bazel-out", "k8-opt", "bin")
        return opt if os.path.isdir(opt) else os.path.join(root, "bazel-bin")
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "dreplay"))


class DocumentRun:
    """Runs one document's commands in a scratch directory. close() must be
    called, and fails when a background command exited early."""

    def __init__(self, root, doc, scratch):
        self.root, self.doc, self.scratch = root, doc, scratch
        self.bins = bin_dir(root)
        self.env = dict(os.environ, B=self.bins)
        self.port = None
        self.background = []

    def prepare(self, command, action):
        for pattern, replacement in action.edits:
            command = re.sub(pattern, replacement, command)
        command = re.sub(r"(?:(?<=^)|(?<=[\s=]))(?:\$B|bazel-bin|bazel-out/k8-opt/bin)/",
                         lambda _: self.bins + "/", command)
        if self.port is not None:
            command = command.replace(":" + DOC_PORT, ":%d" % self.port)
        return command

    def run(self, line, command, action):
        where = "%s:%d: %s" % (self.doc, line, command)
        if re.match(r"(export )?\w+=", command):  # an assignment the next lines use
            name, _, value = command.replace("export ", "", 1).partition("=")
            self.env[name] = os.path.join(self.root, value) if name == "B" else \
                value.replace("$PWD", self.root)
            return
        command = self.prepare(command, action)
        log_path = os.path.join(self.scratch, "command-%d.log" % line)
        with open(log_path, "w") as log:  # the command keeps its own descriptor
            proc = subprocess.Popen(["bash", "-c", command], cwd=self.scratch, env=self.env,
                                    stdout=subprocess.PIPE if action.json else log, stderr=log,
                                    start_new_session=True, text=True)
        if action.background:
            self.background.append((proc, where, log_path))
            if action.port_file:
                self.port = self.wait_for_port(proc, where, log_path, action.port_file)
            elif action.port_log:
                self.port = self.wait_for_port(proc, where, log_path)
            return
        if action.alive_after_s:
            try:
                proc.wait(timeout=action.alive_after_s)
                raise AssertionError("%s: exited with %d before %g s:\n%s" % (
                    where, proc.returncode, action.alive_after_s, tail(log_path)))
            except subprocess.TimeoutExpired:
                stop(proc)
                return
        try:
            out, _ = proc.communicate(timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            stop(proc)
            raise AssertionError("%s: still running after %d s:\n%s" % (
                where, COMMAND_TIMEOUT_S, tail(log_path)))
        if proc.returncode != 0:
            raise AssertionError("%s: exit status %d:\n%s" % (where, proc.returncode,
                                                             tail(log_path)))
        if action.json:
            try:
                json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                raise AssertionError("%s: its output is not JSON: %r" % (where, out[-500:]))

    def wait_for_port(self, proc, where, log_path, port_file=None):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError("%s: exited with %d:\n%s" % (where, proc.returncode,
                                                                 tail(log_path)))
            if port_file:
                text = read(os.path.join(self.scratch, port_file)).strip()
                if text:
                    return int(text)
            else:
                m = re.search(r"listening on [\d.]+:(\d+)", read(log_path))
                if m:
                    return int(m.group(1))
            time.sleep(0.05)
        raise AssertionError("%s: no port within %d s:\n%s" % (where, START_TIMEOUT_S,
                                                              tail(log_path)))

    def close(self):
        """Stops what runs in the background; each must have run until now."""
        exited = ["%s: exited with %d while the commands after it ran:\n%s" % (
            where, proc.returncode, tail(log_path))
            for proc, where, log_path in self.background if proc.poll() is not None]
        for proc, _, _ in reversed(self.background):
            stop(proc)
        if exited:
            raise AssertionError("\n".join(exited))


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def read(path):
    """The file's text; "" while it does not exist."""
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def tail(path, lines=20):
    return "".join(read(path).splitlines(True)[-lines:])


class DocCommandsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.root = docs_drift_test.find_root()
        cls.docs = {}
        for doc in docs_drift_test.doc_files(cls.root):
            with open(os.path.join(cls.root, doc)) as f:
                cls.docs[doc] = list(commands(f.read()))

    def test_every_documented_command_is_run_or_says_why_not(self):
        unmatched = ["%s:%d: %s" % (doc, line, command)
                     for doc, found in self.docs.items() for line, command in found
                     if rule_for(doc, command) is None]
        self.assertEqual(unmatched, [], "commands no rule of tests/doc_commands_test.py "
                         "runs or explains: add one")

    def test_every_rule_still_matches_a_documented_command(self):
        for rule_doc, pattern, _ in RULES:
            found = any(re.match(pattern, command)
                        for doc, cmds in self.docs.items() if rule_doc in (None, doc)
                        for _, command in cmds)
            self.assertTrue(found, "rule %r for %s matches no command" % (pattern, rule_doc))

    def test_the_commands_run(self):
        for doc, found in self.docs.items():
            to_run = [(line, command, rule_for(doc, command)) for line, command in found]
            to_run = [t for t in to_run if isinstance(t[2], Run)]
            if not to_run:
                continue
            with self.subTest(doc=doc), tempfile.TemporaryDirectory(
                    prefix="doc-commands-", dir=os.environ.get("TEST_TMPDIR")) as scratch:
                run = DocumentRun(self.root, doc, scratch)
                try:
                    for line, command, action in to_run:
                        run.run(line, command, action)
                finally:
                    run.close()


class CommandsTest(unittest.TestCase):

    def test_joins_continuations_drops_comments_and_skips_other_blocks(self):
        md = ("```sh\n# a comment\ntools/a.sh --x \\\n    --y  # why\n```\n"
              "```\nart -- not a command\n```\n```python\nimport os\n```\n")
        self.assertEqual(list(commands(md)), [(3, "tools/a.sh --x --y")])

    def test_rules_are_per_document(self):
        self.assertIsInstance(rule_for("README.md", "tools/test.sh"), Skip)
        self.assertIsNone(rule_for("docs/roce.md", "tools/test.sh"))


if __name__ == "__main__":
    unittest.main()
