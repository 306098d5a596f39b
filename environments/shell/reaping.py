"""Signalling a command's process group inside a sandbox and waiting until it is gone."""

from __future__ import annotations

import contextlib
import signal
import time

from environments.shell.channel import GroupKiller


def signal_group(kill_group: GroupKiller, pgid: int | None, signum: int) -> None:
    """Send ``signum`` to group ``pgid`` when there is one (never to pid 0 or 1); a group
    already gone or out of reach is not an error."""
    if pgid is None or pgid <= 1:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        kill_group(pgid, signum)


def reap_group(kill_group: GroupKiller, pgid: int, termed: bool, deadline: float) -> None:
    """After a timed-out command's subshell ended: KILL whatever of its tree outlived TERM.

    Members that ignore TERM (or inherited an ignored TERM) keep running after
    the group leader exits; with ``termed`` (only TERM was sent so far) they get
    until ``deadline``, then KILL. Returns once the tree is gone or 5 s after KILL.
    """
    if termed and wait_group_gone(kill_group, pgid, deadline):
        return
    signal_group(kill_group, pgid, signal.SIGKILL)
    # KILL is delivered asynchronously; return only once the tree is gone.
    wait_group_gone(kill_group, pgid, time.monotonic() + 5.0)


def wait_group_gone(kill_group: GroupKiller, pgid: int, deadline: float) -> bool:
    """Poll until nothing of the group runs (True) or ``deadline`` passes (False)."""
    while True:
        try:
            kill_group(pgid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        if time.monotonic() >= deadline:
            return False
        # Nothing signals a group's end to an outsider: poll.
        time.sleep(0.02)
