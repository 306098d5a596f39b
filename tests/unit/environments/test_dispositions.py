"""A process started with signals ignored (``nohup``, a script's ``&``) keeps ignoring
them itself but starts its children with every signal at its default."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from tests.helpers import REPO

IGNORED = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR2, signal.SIGALRM,
           signal.SIGTTOU, signal.SIGCHLD)  # fmt: skip

LAUNCHER = f"""
import os, signal, sys
for s in {[int(s) for s in IGNORED]}:
    signal.signal(s, signal.SIG_IGN)
os.execv(sys.executable, [sys.executable, "-c", sys.argv[1]])
"""
"""Starts the host process with :data:`IGNORED` ignored, as a launcher would."""

HOST = """
import json, os, signal, subprocess
from environments.dispositions import pass_on_default_dispositions

def ignored(status):
    line = next(x for x in status.splitlines() if x.startswith("SigIgn:"))
    mask = int(line.split()[1], 16)
    return [n for n in range(1, 65) if mask >> (n - 1) & 1]

before = ignored(open("/proc/self/status").read())
changed = pass_on_default_dispositions()
child = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True, check=True)
for s in (signal.SIGHUP, signal.SIGINT, signal.SIGUSR2, signal.SIGALRM):
    os.kill(os.getpid(), s)  # ignored before: must not end this process now either
print(json.dumps({"before": before, "changed": changed, "child": ignored(child.stdout),
                  "chld": signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL,
                  "again": pass_on_default_dispositions()}))
"""


def test_children_start_with_defaults_while_the_host_still_ignores() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", LAUNCHER, HOST], capture_output=True,
                          text=True, env=env, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    wanted = sorted(int(s) for s in IGNORED)
    assert set(wanted) <= set(report["before"]), report  # the launcher's ignores did reach it
    wanted_names = [signal.Signals(s).name for s in wanted]
    assert report["changed"] == wanted_names, report
    assert report["child"] == [], report  # SIGPIPE and SIGXFSZ too: subprocess restores them
    assert report["chld"], report  # children are waited for, not reaped by the kernel
    assert report["again"] == [], report


def test_nothing_changes_in_a_process_that_ignores_nothing() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = "from environments.dispositions import pass_on_default_dispositions as p; print(p())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr


def test_a_signal_without_a_name_is_reported_by_its_number() -> None:
    realtime = signal.SIGRTMIN + 2
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = "from environments.dispositions import pass_on_default_dispositions as p; print(p())"
    def ignore() -> None:
        signal.signal(realtime, signal.SIG_IGN)

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=60, preexec_fn=ignore)  # fmt: skip
    assert (done.returncode, done.stdout) == (0, f"['signal {realtime}']\n"), done.stderr
