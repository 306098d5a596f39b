"""Process trees on this machine: signalling a command's whole tree, and pid namespaces.

A jailed command lives in a pid namespace of its own: the numbers it reports
(``/proc/self/stat`` inside the jail) are the namespace's. The worker acts on
the host's numbers only; :func:`host_pgid` translates.
"""

from __future__ import annotations

import contextlib
import os

import psutil


def kill_tree(pgid: int, signum: int, seen: dict[int, set[int]]) -> None:
    """Signal a process group, its leader and every descendant of that leader, even ones
    that left the group.

    ``pgid`` is the pid of the command's subshell, which leads a group of its own only
    where its shell has job control (bash; dash and busybox ash have none without a
    tty): so that process itself is signalled too. ``seen`` remembers the processes
    found per group, so members reparented after their parent died are still reached.
    ``signum == 0`` probes: raises ``ProcessLookupError`` when none of them is still
    running (zombies count as gone).
    """
    pids = seen.get(pgid)
    if pids is None:
        pids = seen[pgid] = {pgid} if running(pgid) else set()
    tree: list[int] = []  # parents before their children
    with contextlib.suppress(psutil.Error):
        tree = [p.pid for p in psutil.Process(pgid).children(recursive=True)]
    pids.update(tree)
    if signum == 0:
        members = pids | {p.pid for p in psutil.process_iter() if group_of(p.pid) == pgid}
        if not any(running(pid) for pid in members):
            raise ProcessLookupError(f"nothing left of process group {pgid}")
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
    # A shell is signalled before its children: a shell without job control whose child
    # died of the signal first would otherwise run its next statement (`sleep; echo`).
    first = [pid for pid in (pgid, *tree) if pid in pids]
    for pid in (*first, *(pids - set(first))):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def group_of(pid: int) -> int | None:
    """The process group of ``pid``; None when it is gone."""
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _namespace_ids(pid: int, field: str) -> list[int]:
    """``NSpid``/``NSpgid`` of ``pid``: its number in each pid namespace, the host's first."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(field.encode() + b":"):
                    return [int(n) for n in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


def host_pgid(jail_root: int, ns_pgid: int) -> int | None:
    """The host's number of process group ``ns_pgid`` of the jail under host pid
    ``jail_root`` (the jail's bubblewrap process); None when no member is left.

    Where no process leads that group (a shell without job control), the host's number
    of the process ``ns_pgid`` itself, so that :func:`kill_tree` reaches its tree."""
    try:
        members = psutil.Process(jail_root).children(recursive=True)
    except psutil.Error:
        return None
    alone = None
    for proc in members:
        ids = _namespace_ids(proc.pid, "NSpgid")
        if len(ids) > 1 and ids[-1] == ns_pgid:
            return ids[0]
        pids = _namespace_ids(proc.pid, "NSpid")
        if len(pids) > 1 and pids[-1] == ns_pgid:
            alone = pids[0]
    return alone
