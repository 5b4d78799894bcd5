"""tools/launch/slurm/: dreplay as a heterogeneous Slurm job, on a Slurm cluster
this test starts on this machine (tools/launch/slurm/local_cluster.sh: munged,
slurmctld and three slurmd, one per virtual node) and stops again.

  * submit.sh --wait runs the job to completion: the buffer node, the actors
    and the learner each ran on their own node (one per heterogeneous
    component), the learner got the GPU it asked for (a stand-in the
    cluster declares), the learner trained its budget, and the counters add up
    across them (tools/launch/cluster_counters.py, checked again here from the
    job directory's files);
  * submit.sh puts --learner_gres on the learner's component only;
  * edge sites (submit.sh --buffer_nodes 2): two buffer node tasks, actor r
    at node r mod 2, the learner over both, each node's counters adding up.

Needs root and Debian's slurm-wlm and munge (tools/install_deps.sh); skips
with the reason otherwise.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import unittest

from tools.launch import metrics_lines

ACTORS = 2
TRAIN_STEPS = 300
# The job's own limit (minutes) and how long the test waits for it.
JOB_TIME_MIN = 4
JOB_TIMEOUT_S = 200
DAEMONS = ("munged", "munge", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel",
           "sinfo")
SBIN = ":/usr/sbin:/sbin"


def runfile(path):
    base = os.environ.get("TEST_SRCDIR")
    if base is None:  # run by hand from the workspace root
        return os.path.abspath(path)
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "dreplay"), path)


def bin_dir():
    if os.environ.get("TEST_SRCDIR") is None:
        return os.path.abspath("bazel-bin")
    return os.path.dirname(os.path.dirname(runfile("learner_client/learner")))


def skip_reason():
    if os.geteuid() != 0:
        return "needs root (the test starts munged, slurmctld and slurmd)"
    path = os.environ.get("PATH", "") + SBIN
    missing = [d for d in DAEMONS if shutil.which(d, path=path) is None]
    if missing:
        return "not installed: %s (tools/install_deps.sh installs slurm-wlm and munge)" % (
            ", ".join(missing))
    return None


def prom_value(text, sample):
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    raise AssertionError("no sample %s in the server's metrics" % sample)


class SubmitDryRunTest(unittest.TestCase):

    def test_gres_goes_to_the_learner_component_only(self):
        proc = subprocess.run(
            [runfile("tools/launch/slurm/submit.sh"), "--dry_run", "--actors", "3",
             "--learner_gres", "gpu:1", "--partition", "p", "--", "--train_steps", "10"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=True)
        line = proc.stdout.decode()
        parts = line.split(" : ")
        self.assertEqual(len(parts), 3, line)
        buffer, actors, learner = parts
        self.assertIn("--ntasks=1", buffer)
        self.assertIn("--ntasks=3", actors)
        self.assertIn("--ntasks=1", learner)
        self.assertIn("--gres=gpu:1", learner)
        self.assertNotIn("--gres", buffer + actors)
        for part in parts:
            self.assertIn("--partition=p", part)
        self.assertIn("dreplay.sbatch", learner)
        self.assertTrue(learner.rstrip().endswith("--train_steps 10"), line)

    def test_buffer_nodes_are_tasks_of_the_buffer_component(self):
        proc = subprocess.run(
            [runfile("tools/launch/slurm/submit.sh"), "--dry_run", "--actors", "3",
             "--buffer_nodes", "2", "--", "--train_steps", "10"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=True)
        buffer, actors, _ = proc.stdout.decode().split(" : ")
        self.assertIn("--ntasks=2", buffer)
        self.assertIn("--ntasks=3", actors)
        proc = subprocess.run(
            [runfile("tools/launch/slurm/submit.sh"), "--dry_run", "--actors", "1",
             "--buffer_nodes", "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("needs at least as many --actors", proc.stdout.decode())


@unittest.skipIf(skip_reason() is not None, skip_reason())
class SlurmJobTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.env = dict(os.environ, PATH=os.environ.get("PATH", "/usr/bin:/bin") + SBIN)
        # Under /tmp: munged wants its socket's directory searchable by all,
        # which Bazel's own temporary directory (under /root) is not.
        cls.dir = tempfile.mkdtemp(prefix="dreplay-slurm-", dir="/tmp")
        os.chmod(cls.dir, 0o711)
        cls.cluster = os.path.join(cls.dir, "cluster")
        cls.env["SLURM_CONF"] = os.path.join(cls.cluster, "slurm.conf")
        # The daemons leave the test's process group: stop them even when
        # the test is stopped for its timeout (SIGTERM).
        def on_term(signum, frame):
            cls.tearDownClass()
            os._exit(128 + signum)
        signal.signal(signal.SIGTERM, on_term)
        proc = subprocess.run([runfile("tools/launch/slurm/local_cluster.sh"), "start", cls.cluster,
                               "--gpu"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=cls.env,
                              timeout=120)
        print(proc.stdout.decode(errors="replace"))
        if proc.returncode != 0:
            cls.tearDownClass()
            raise AssertionError("local_cluster.sh start failed:\n" +
                                 proc.stdout.decode(errors="replace"))

    @classmethod
    def tearDownClass(cls):
        subprocess.run([runfile("tools/launch/slurm/local_cluster.sh"), "stop", cls.cluster],
                       env=cls.env, timeout=120)
        outputs = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR")
        if outputs:
            shutil.copytree(cls.dir, os.path.join(outputs, "slurm"), symlinks=True,
                            ignore=shutil.ignore_patterns("*.socket", "munge.key"),
                            dirs_exist_ok=True)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def scontrol_job(self, job_id):
        proc = subprocess.run(["scontrol", "show", "job", job_id], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env=self.env, timeout=30)
        return proc.stdout.decode(errors="replace")

    def submit(self, jobs, options, args):
        """Runs submit.sh --wait; (job id, job dir, the batch script's output)."""
        os.makedirs(jobs)
        cmd = ([runfile("tools/launch/slurm/submit.sh")] + options +
               ["--time", str(JOB_TIME_MIN), "--output", os.path.join(jobs, "dreplay-%j.out"),
                "--wait", "--", "--bin_dir", bin_dir(), "--provider", "auto"] + args)
        proc = subprocess.Popen(cmd, cwd=jobs, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=self.env)
        try:
            out = proc.communicate(timeout=JOB_TIMEOUT_S)[0].decode(errors="replace")
        except subprocess.TimeoutExpired:
            proc.kill()
            subprocess.run(["scancel", "--full", "--user=root"], env=self.env, timeout=30)
            raise AssertionError("the job did not end within %d s:\n%s" % (
                JOB_TIMEOUT_S, subprocess.run(["squeue"], stdout=subprocess.PIPE,
                                              env=self.env).stdout.decode()))
        job_id = out.strip().splitlines()[0] if out.strip() else ""
        self.assertRegex(job_id, r"^\d+$", out)
        with open(os.path.join(jobs, "dreplay-%s.out" % job_id), errors="replace") as f:
            batch_out = f.read()
        print(batch_out)
        self.assertEqual(proc.returncode, 0, "job failed:\n" + out + batch_out)
        return job_id, os.path.join(jobs, "dreplay-" + job_id), batch_out

    def test_edge_sites_job_trains_and_each_node_adds_up(self):
        job_id, job_dir, batch_out = self.submit(
            os.path.join(self.dir, "sites"),
            ["--actors", "3", "--buffer_nodes", "2", "--buffer_cpus", "1", "--actor_cpus", "1",
             "--learner_cpus", "1"],
            ["--train_steps", str(TRAIN_STEPS), "--actor_rate", "300", "--min_replay", "200",
             "--seed", "2", "--learner_flag=--eval_episodes=5",
             "--learner_flag=--shard_policy=exact"])
        with open(os.path.join(job_dir, "servers.txt")) as f:
            servers = f.read().split()
        self.assertEqual(len(servers), 2)
        for k, actors in ((0, (0, 2)), (1, (1,))):
            with open(os.path.join(job_dir, "server-%d.log" % k), errors="replace") as f:
                server_log = f.read()
            self.assertIn("listening on %s " % servers[k], server_log)
            self.assertIn("accepted learner", server_log)
            for i in actors:
                self.assertIn("accepted actor %d " % i, server_log)
            with open(os.path.join(job_dir, "counters-site-%d.txt" % k)) as f:
                counters = dict(line.strip().split("=") for line in f if "=" in line)
            self.assertGreater(int(counters["actors_committed"]), 0, counters)
            self.assertGreater(int(counters["server_priority_updates_applied"]), 0, counters)
        with open(os.path.join(job_dir, "learner.log"), errors="replace") as f:
            self.assertEqual(len(re.findall(r"^node: ", f.read(), re.M)), 2)
        _, summary = metrics_lines.read(os.path.join(job_dir, "metrics.jsonl"), strict=True)
        self.assertEqual(summary["train_steps"], TRAIN_STEPS)
        self.assertIn("done; results in %s" % job_dir, batch_out)

    def test_heterogeneous_job_trains_and_adds_up(self):
        job_id, job_dir, batch_out = self.submit(
            os.path.join(self.dir, "jobs"),
            ["--actors", str(ACTORS), "--buffer_cpus", "1", "--actor_cpus", "1",
             "--learner_cpus", "1", "--learner_gres", "gpu:1"],
            ["--train_steps", str(TRAIN_STEPS), "--actor_rate", "300", "--min_replay", "500",
             "--seed", "2", "--learner_flag=--eval_episodes=5",
             "--learner_flag=--progress_interval_s=2"])

        # Slurm's view: every component completed with exit code 0.
        info = self.scontrol_job(job_id)
        self.assertEqual(len(re.findall(r"JobState=COMPLETED", info)), 3, info)
        self.assertEqual(len(re.findall(r"ExitCode=0:0", info)), 3, info)

        # One node per component: the buffer node, the actors, the learner.
        nodes = {}
        gpus = {}
        with open(os.path.join(job_dir, "nodes.txt")) as f:
            for line in f:
                role, rank, node, _, visible = line.split()
                nodes.setdefault(role, {})[int(rank)] = node
                gpus[role] = visible
        self.assertEqual(sorted(nodes), ["actor", "learner", "server"])
        self.assertEqual(sorted(nodes["actor"]), list(range(ACTORS)))
        self.assertEqual(len(set(nodes["actor"].values())), 1)
        self.assertEqual(len({nodes["server"][0], nodes["learner"][0],
                              nodes["actor"][0]}), 3, nodes)
        # The GPU (the cluster's stand-in) went to the learner only.
        self.assertEqual(gpus, {"server": "-", "actor": "-", "learner": "0"})

        # The address the server wrote is the one it listened on, and every
        # client reached it.
        with open(os.path.join(job_dir, "server.address")) as f:
            address = f.read().strip()
        with open(os.path.join(job_dir, "server.log"), errors="replace") as f:
            server_log = f.read()
        self.assertIn("listening on %s " % address, server_log)
        self.assertIn("accepted learner", server_log)
        for i in range(ACTORS):
            self.assertIn("accepted actor %d " % i, server_log)

        # The learner trained its budget; the counters add up across hosts.
        _, summary = metrics_lines.read(os.path.join(job_dir, "metrics.jsonl"), strict=True)
        self.assertIsNotNone(summary)
        self.assertEqual(summary["train_steps"], TRAIN_STEPS)
        self.assertGreater(summary["transitions_fetched_total"], 0)
        committed = 0
        for i in range(ACTORS):
            with open(os.path.join(job_dir, "actor-%d.log" % i), errors="replace") as f:
                found = re.findall(r"actor %d: \d+ env steps, \d+ episodes, (\d+) transitions "
                                   r"committed" % i, f.read())
            self.assertTrue(found, "actor-%d.log has no final line" % i)
            committed += int(found[-1])
        self.assertGreater(committed, 0)
        with open(os.path.join(job_dir, "server_metrics.prom")) as f:
            prom = f.read()
        self.assertEqual(prom_value(prom, "dreplay_server_inserted_total") +
                         prom_value(prom, 'dreplay_server_dropped_total{cause="overrun"}') +
                         prom_value(prom, 'dreplay_server_dropped_total{cause="torn"}'),
                         committed)
        self.assertGreater(prom_value(prom, "dreplay_server_batches_released_total"), 0)
        with open(os.path.join(job_dir, "counters.txt")) as f:
            counters = dict(line.strip().split("=") for line in f if "=" in line)
        self.assertEqual(int(counters["actors_committed"]), committed)
        self.assertEqual(int(counters["learner_train_steps"]), TRAIN_STEPS)
        self.assertIn("done; results in %s" % job_dir, batch_out)


if __name__ == "__main__":
    unittest.main()
