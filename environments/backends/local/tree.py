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
    """Signal a process group and every descendant of its leader, even ones that left it.

    ``seen`` remembers the descendants found per group, so members reparented after
    their parent died are still reached. ``signum == 0`` probes: raises
    ``ProcessLookupError`` when none of them is still running (zombies count as gone).
    """
    pids = seen.setdefault(pgid, set())
    with contextlib.suppress(psutil.Error):
        pids.update(p.pid for p in psutil.Process(pgid).children(recursive=True))
    if signum == 0:
        members = pids | {p.pid for p in psutil.process_iter() if group_of(p.pid) == pgid}
        if not any(running(pid) for pid in members):
            raise ProcessLookupError(f"nothing left of process group {pgid}")
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
    for pid in pids:
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
    ``jail_root`` (the jail's bubblewrap process); None when no member is left."""
    try:
        members = psutil.Process(jail_root).children(recursive=True)
    except psutil.Error:
        return None
    for proc in members:
        ids = _namespace_ids(proc.pid, "NSpgid")
        if len(ids) > 1 and ids[-1] == ns_pgid:
            return ids[0]
    return None

