"""A worker started with signals ignored (``nohup``, a script's ``&``, a service manager)
does not pass them on: its sandboxes' commands and background processes start with
every signal at its default, so a signal ends them as it would on a plain host."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fixtures_workers import settings_for
from tests.helpers import WorkerProcess, call
from worker.client import SandboxClient

IGNORED = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR2, signal.SIGALRM,
           signal.SIGTTOU)  # fmt: skip
"""What the worker's launcher ignores: Celery handles some of these itself, not all."""

ATTACK = "sh -c 'kill -{sig} $$; echo survived-$((1 + 1))'"
"""A command that signals itself: with the signal ignored it survives and says so."""

REPORT = "grep -E '^SigIgn:' /proc/self/status"


@pytest.fixture
def ignoring_worker(start_worker: Callable[..., WorkerProcess]) -> Iterator[WorkerProcess]:
    """A real worker (no jail: the jail's own init resets signals) started from a parent
    that ignores :data:`IGNORED`."""
    old = {s: signal.signal(s, signal.SIG_IGN) for s in IGNORED}
    try:
        worker = start_worker(None, SBX_LOCAL_ISOLATION="none")
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    yield worker


def test_commands_of_a_worker_started_ignoring_signals_see_their_defaults(
    ignoring_worker: WorkerProcess, sbx_home: Path
) -> None:
    with SandboxClient(session_id="signals", settings=settings_for(sbx_home, None)) as c:
        assert call(c, "terminal", {"command": REPORT})["output"] == "SigIgn:\t0000000000000000\n"
        for s in IGNORED[:-1]:  # SIGTTOU's default stops the command (and the call waits)
            r = call(c, "terminal", {"command": ATTACK.format(sig=s.name[3:])})
            assert r["exit_code"] == 128 + s and "survived-2" not in r["output"], (s.name, r)
        started = call(c, "terminal", {"command": f"{REPORT}; " + ATTACK.format(sig="ALRM"),
                                       "background": True})  # fmt: skip
        assert started.get("status") == "running", started
        done = call(c, "process", {"action": "wait", "process_id": started["process_id"]})
    assert done["output_tail"].startswith("SigIgn:\t0000000000000000\n"), done
    assert "survived-2" not in done["output_tail"], done
    assert done["exit_code"] == 128 + signal.SIGALRM, done
    # The worker itself still ignores what its launcher meant it to.
    assert ignoring_worker.proc is not None
    ignoring_worker.proc.send_signal(signal.SIGALRM)
    with SandboxClient(session_id="signals", settings=settings_for(sbx_home, None)) as c:
        assert call(c, "terminal", {"command": "echo still"})["output"] == "still\n"
