"""One role's process across its restarts, for tools/chaos/chaos.py: started
from an argv made per start, its output appended to one log, signalled,
and known ready by a line of that log. Only the Python standard library is
used."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launch"))
import run_local  # noqa: E402


class Child:
    """One role's process across its restarts: state is "running", "paused",
    "terminating" (SIGTERM sent, `deadline` for its exit), or "down"."""

    def __init__(self, name, argv_for_start, out_dir, ready_marker):
        self.name = name
        self.argv_for_start = argv_for_start
        # The log line that says the process handles SIGTERM (its stop
        # signals are installed before it): a SIGTERM before it would end
        # the process by the signal's default action.
        self.ready_marker = ready_marker.encode()
        self.log_offset = 0
        self.is_ready = False
        self.log_path = os.path.join(out_dir, name + ".log")
        self.starts = 0
        self.popen = None
        self.state = "down"
        self.deadline = None
        self.resume_at = None
        self.restart_at = None

    def start(self):
        argv = self.argv_for_start(self.starts)
        with open(self.log_path, "ab") as f:
            self.log_offset = f.tell()
            f.write(("=== start %d: %s\n" % (self.starts, " ".join(argv))).encode())
            f.flush()
            self.popen = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
        self.starts += 1
        self.state = "running"
        self.restart_at = None
        self.is_ready = False

    def ready(self):
        if not self.is_ready:
            try:
                with open(self.log_path, "rb") as f:
                    f.seek(self.log_offset)
                    self.is_ready = self.ready_marker in f.read()
            except OSError:
                pass
        return self.is_ready

    def send(self, sig):
        if self.popen is not None and self.popen.poll() is None:
            try:
                os.kill(self.popen.pid, sig)
            except ProcessLookupError:
                pass

    def tail(self, lines=12):
        return run_local.log_tail(self.log_path, lines)
