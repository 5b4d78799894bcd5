"""The launch plan (tools/launch/launch_plan.py) sizes the replay server from
`actor --print_layout`: the flags tools/launch/run_local.py gives the server are
the actor binary's numbers (slot size, transition spec, observation size,
actions, parameter bytes), for every environment, without starting any
process but the actor's --print_layout. Every launcher takes its flags from
that one plan: the files `launch_plan.py --write` leaves for the shell
launchers are the flags run_local.py gives, and no launcher computes a size
itself.
"""

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import unittest


def runfile(path):
    base = os.environ.get("TEST_SRCDIR")
    if base is None:  # run by hand from the workspace root
        return os.path.abspath(path)
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "dreplay"), path)


def load_run_local():
    spec = importlib.util.spec_from_file_location("run_local", runfile("tools/launch/run_local.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_lines(path):
    with open(path) as f:
        return f.read().splitlines()


def flag_values(argv):
    return dict(a[2:].split("=", 1) for a in argv[1:] if a.startswith("--") and "=" in a)


class RunLocalLayoutTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.run_local = load_run_local()
        cls.bin_dir = os.path.dirname(os.path.dirname(runfile("actor_client/actor")))

    def args(self, *extra):
        return self.run_local.parse_args(
            ["--bin_dir", self.bin_dir, "--out_dir", tempfile.mkdtemp(
                dir=os.environ.get("TEST_TMPDIR"))] + list(extra))

    def test_server_flags_are_the_actors_layout_for_every_environment(self):
        for env in self.run_local.ENVIRONMENTS:
            with self.subTest(env=env):
                args = self.args("--env", env, "--n_step", "4", "--gamma", "0.95",
                                 "--hidden", "32")
                layout = self.run_local.actor_layout(args)
                self.assertEqual(set(self.run_local.LAYOUT_KEYS) - set(layout), set())
                self.assertEqual(layout["env"], env)
                self.assertIn("nstep=4 gamma=0.95", layout["transition_spec"])
                self.assertGreater(layout["slot_size"], layout["payload_bytes"])
                flags = flag_values(self.run_local.server_argv(args, "/tmp/port", layout))
                self.assertEqual(flags["slot_size"], str(layout["slot_size"]))
                self.assertEqual(flags["transition_spec"], layout["transition_spec"])
                self.assertEqual(flags["observation_size"], str(layout["observation_size"]))
                self.assertEqual(flags["num_actions"], str(layout["num_actions"]))
                param_bytes = int(flags["param_bytes"])
                self.assertGreaterEqual(param_bytes, layout["params_bytes"])
                self.assertEqual(param_bytes % self.run_local.PARAM_BYTES_MULTIPLE, 0)

    def test_minatar_runs_get_minatars_settings_and_byte_observations(self):
        args = self.args("--env", "MinAtar/Breakout")
        self.assertEqual((args.batch_size, args.capacity, args.min_replay, args.lr,
                          args.target_update), (32, 131072, 5000, 0.00025, 1000))
        self.assertEqual(self.args("--env", "MinAtar/Breakout", "--batch_size", "64").batch_size,
                         64)
        self.assertEqual(self.args().batch_size, 64)  # CartPole-v1 keeps its own
        native = self.run_local.actor_layout(args)
        self.assertIn("obs=400u8 act=6", native["transition_spec"])
        self.assertEqual(native["payload_bytes"], 20 + 2 * 400)
        pixels = self.run_local.actor_layout(
            self.args("--env", "MinAtar/Breakout", "--observation", "pixels84"))
        self.assertEqual(pixels["payload_bytes"], 20 + 8 * 84 * 84)
        self.assertIn("--observation=pixels84", self.run_local.actor_argv(
            self.args("--env", "MinAtar/Breakout", "--observation", "pixels84"), "x:1", 0))

    def test_the_hybrid_placement_forwards_at_the_server_and_limits_at_the_learner(self):
        layout = self.run_local.actor_layout(self.args())
        for policy, queue in (("priority", None), ("uniform", None), ("fifo", "1024")):
            with self.subTest(forward_policy=policy):
                extra = ["--forward_queue", queue] if queue else []
                args = self.args("--replay_placement", "hybrid", "--forward_policy", policy,
                                 "--samples_per_insert", "2", *extra)
                server = flag_values(self.run_local.server_argv(args, "/tmp/port", layout))
                learner = flag_values(self.run_local.learner_argv(args, "x:1"))
                self.assertEqual(server["forward"], policy)
                self.assertEqual(server.get("forward_queue"), queue)
                self.assertNotIn("samples_per_insert", server)
                self.assertEqual(learner["samples_per_insert"], "2.0")
                self.assertEqual(learner["replay_placement"], "hybrid")
                self.assertNotIn("forward_policy", learner)
        # The fifo queue defaults to 4096, cut to a smaller capacity; other
        # policies take no queue.
        fifo = ("--replay_placement", "hybrid", "--forward_policy", "fifo")
        self.assertEqual(self.args(*fifo).forward_queue, 4096)
        self.assertEqual(self.args(*fifo, "--capacity", "1024").forward_queue, 1024)
        self.assertEqual(self.args("--replay_placement", "hybrid", "--capacity",
                                   "1024").forward_queue, None)
        # The placement's default, and policies of another placement refused.
        self.assertEqual(self.args("--replay_placement", "hybrid").forward_policy, "priority")
        self.assertEqual(self.args("--replay_placement", "learner").forward_policy, "in_order")
        for bad in (["--replay_placement", "hybrid", "--forward_policy", "freshest"],
                    ["--replay_placement", "learner", "--forward_policy", "fifo"],
                    ["--replay_placement", "buffer", "--forward_policy", "priority"],
                    ["--replay_placement", "hybrid", "--forward_queue", "64"],
                    ["--replay_placement", "buffer", "--forward_queue", "64"]):
            with self.subTest(bad=bad), self.assertRaises(SystemExit):
                self.args(*bad)

    def test_link_codec_reaches_the_server_only(self):
        for extra, expected in ((["--link_codec", "zstd:3"], "zstd:3"), ([], None)):
            with self.subTest(extra=extra):
                args = self.args(*extra)
                layout = self.run_local.actor_layout(args)
                server = flag_values(self.run_local.server_argv(args, "/tmp/port", layout))
                self.assertEqual(server.get("link_codec"), expected)
                self.assertNotIn("link_codec",
                                 flag_values(self.run_local.actor_argv(args, "x:1", 0)))
        for bad in ("gzip", "zstd:x", "zstd:"):
            with self.subTest(bad=bad), self.assertRaises(SystemExit):
                self.args("--link_codec", bad)

    def test_frame_stack_makes_actors_and_server_store_each_frame_once(self):
        args = self.args("--env", "MinAtar/Breakout", "--observation", "pixels84",
                         "--frame_stack", "4", "--actors", "2", "--capacity", "4096")
        layout = self.run_local.actor_layout(args)
        # A record: 40 bytes of header and references, then one frame.
        self.assertEqual(layout["payload_bytes"], 40 + 84 * 84)
        self.assertEqual(layout["frame_stack"], 4)
        server = flag_values(self.run_local.server_argv(args, "/tmp/port", layout))
        self.assertEqual(server["frame_stack"], "4")
        self.assertEqual(server["actor_window"], "1024")  # half of each lease
        self.assertEqual(flag_values(self.run_local.actor_argv(args, "x:1", 0))["frame_stack"],
                         "4")
        learner = self.args("--env", "MinAtar/Breakout", "--observation", "pixels84",
                            "--frame_stack", "4", "--replay_placement", "learner")
        self.assertEqual(learner.frame_stack, 4)
        hybrid = self.args("--env", "MinAtar/Breakout", "--observation", "pixels84",
                           "--frame_stack", "4", "--replay_placement", "hybrid",
                           "--forward_policy", "priority")
        self.assertEqual(flag_values(self.run_local.server_argv(
            hybrid, "/tmp/port", self.run_local.actor_layout(hybrid)))["frame_stack"], "4")
        for bad in (["--frame_stack", "4"],  # native CartPole has no frames
                    ["--env", "MinAtar/Breakout", "--observation", "pixels84",
                     "--frame_stack", "3"],
                    ["--env", "MinAtar/Breakout", "--observation", "pixels84",
                     "--frame_stack", "4", "--payload_pad_bytes", "64"]):
            with self.subTest(bad=bad), self.assertRaises(SystemExit):
                self.args(*bad)

    def test_pixels84_is_refused_for_an_environment_without_a_rendering(self):
        with self.assertRaises(SystemExit):
            self.args("--env", "CartPole-v1", "--observation", "pixels84")

    def test_credentials_are_the_servers_derivation_in_files_of_mode_0600(self):
        # The vector of protocol/handshake_test.cc (ActorCredentialTest).
        self.assertEqual(
            self.run_local.actor_credential("master-token-for-tests-0123", 7),
            "15cd61483903c0a97dd007b768957bddd03f26db6bf737be50ae4d546b090e98")
        out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        token_file, actor_files = self.run_local.make_credentials(out, 3)
        self.assertEqual(len(actor_files), 3)
        with open(token_file) as f:
            master = f.read().strip()
        self.assertGreaterEqual(len(master), 32)
        for i, path in enumerate([token_file] + actor_files):
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o600, path)
            if i > 0:
                with open(path) as f:
                    self.assertEqual(f.read().strip(),
                                     self.run_local.actor_credential(master, i - 1))
        args = self.args()
        self.assertIn("--auth_token_file=" + token_file,
                      self.run_local.server_argv(args, "/tmp/port", {
                          "slot_size": 1, "params_bytes": 1, "transition_spec": "x",
                          "observation_size": 1, "num_actions": 1}, token_file))
        self.assertIn("--insecure", self.run_local.actor_argv(args, "127.0.0.1:1", 0))

    def test_the_network_size_follows_hidden(self):
        small = self.run_local.actor_layout(self.args("--hidden", "8"))
        large = self.run_local.actor_layout(self.args("--hidden", "64,64"))
        self.assertLess(small["params_bytes"], large["params_bytes"])
        self.assertEqual(small["slot_size"], large["slot_size"])

    def test_a_missing_actor_binary_is_a_clear_error(self):
        args = self.args()
        args.bin_dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        with self.assertRaises(self.run_local.RunError) as e:
            self.run_local.actor_layout(args)
        self.assertIn("not found", str(e.exception))


class LaunchPlanTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.run_local = load_run_local()
        cls.plan = cls.run_local.launch_plan
        cls.bin_dir = os.path.dirname(os.path.dirname(runfile("actor_client/actor")))

    def write(self, *options):
        out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        proc = subprocess.run([sys.executable, runfile("tools/launch/launch_plan.py"),
                               "--bin_dir=" + self.bin_dir, "--write=" + out] + list(options),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return proc, out

    def test_the_shell_launchers_get_the_flags_run_local_gives(self):
        options = ["--env", "MinAtar/Breakout", "--actors", "3", "--samples_per_insert", "2",
                   "--duration_s", "9"]
        proc, out = self.write(*options)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        args = self.run_local.parse_args(["--bin_dir", self.bin_dir, "--out_dir", out] + options)
        layout = self.run_local.actor_layout(args)
        server = self.run_local.server_argv(args, "/tmp/port", layout)
        learner = self.run_local.learner_argv(args, ["h:1"])
        actor = self.run_local.actor_argv(args, "h:1", 2)
        self.assertEqual(read_lines(os.path.join(out, "server.args")),
                         [a for a in server[1:] if not a.startswith(("--listen", "--port_file",
                                                                     "--insecure"))])
        self.assertEqual(read_lines(os.path.join(out, "learner.args")),
                         [a for a in learner[1:] if not a.startswith(("--server=", "--insecure"))])
        self.assertEqual(read_lines(os.path.join(out, "actor.args")),
                         [a for a in actor[1:] if not a.startswith(
                             ("--server=", "--insecure", "--actor_index", "--num_actors"))])
        # The rate limit goes to the process that enforces it.
        self.assertIn("--samples_per_insert=2.0", read_lines(os.path.join(out, "server.args")))
        self.assertIn("--spi_error_buffer=128.0", read_lines(os.path.join(out, "server.args")))
        self.assertNotIn("--samples_per_insert=2.0", read_lines(os.path.join(out, "learner.args")))

    def test_a_bad_plan_is_refused_with_the_option_named(self):
        proc, _ = self.write("--capacity", "1000")
        self.assertEqual(proc.returncode, 1)
        self.assertIn("--capacity must be a power of two", proc.stderr)
        with self.assertRaises(self.plan.PlanError):
            self.plan.options(no_such_option=1)

    def test_no_launcher_sizes_the_server_itself(self):
        # The sizes and the layout are the plan's: a launcher that reads
        # `actor --print_layout` or rounds the parameter bytes itself has
        # become a second recipe.
        for path in ("tools/launch/run_local.py", "tools/chaos/chaos.py", "tools/launch/netns_cluster.sh",
                     "tools/launch/slurm/dreplay.sbatch"):
            with open(runfile(path)) as f:
                text = f.read()
            with self.subTest(launcher=path):
                self.assertIn("launch_plan", text)
                for needle in ("--print_layout", "--param_bytes", "--slot_size=",
                               "--transition_spec=", "1023", "PARAM_BYTES_MULTIPLE)"):
                    self.assertNotIn(needle, re.sub(r"#.*", "", text), needle)


if __name__ == "__main__":
    unittest.main()
