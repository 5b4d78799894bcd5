"""tools/gpu_check.py --smoke: both arms (batches from a device ring, and
from dreplay through a FrameCache) train on the CPU device, and the report
holds together. Its figures check the tool, not a GPU."""

import json
import os
import subprocess
import sys

import pytest

import dreplay
from replay_service import binary

RUN_TIMEOUT_S = 240.0


def workspace_root():
    if "TEST_SRCDIR" in os.environ:
        return os.path.join(os.environ["TEST_SRCDIR"], "dreplay")
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def run_check(args, tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(dreplay.__file__)))
    path = os.path.join(workspace_root(), "tools", "gpu_check.py")
    return subprocess.run([sys.executable, path] + args, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, env=env, cwd=str(tmp_path))


def test_smoke_trains_both_arms_and_reports(tmp_path):
    pytest.importorskip("torch")
    bin_dir = os.path.dirname(os.path.dirname(binary("replay_server/replay_server")))
    out = run_check(["--smoke", "--json", "--bin_dir=" + bin_dir,
                     "--out_dir=" + str(tmp_path / "logs")], tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["smoke"] and report["device"] == "cpu" and not report["bf16"]
    assert report["local_updates"] == 8 and report["dreplay_updates"] == 8
    assert report["local_updates_per_s"] > 0 and report["dreplay_updates_per_s"] > 0
    assert report["ratio"] == pytest.approx(
        report["dreplay_updates_per_s"] / report["local_updates_per_s"])
    # Frames cross to the device once each: less than the stacks would be.
    assert 0 < report["h2d_bytes_per_update"] < report["raw_stacks_bytes_per_update"]
    assert report["service_cpu_cores"] > 0


def test_a_bad_flag_exits_2(tmp_path):
    pytest.importorskip("torch")
    out = run_check(["--smoke", "--capacity=1000"], tmp_path)
    assert out.returncode == 2
    assert "--capacity" in out.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
