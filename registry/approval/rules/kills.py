"""Killing processes: mass kills, and killing the worker that runs the sandbox.

Same contract as :mod:`registry.approval.rules`. Killing a named program
(``pkill -f 'python server.py'``, ``killall node``, ``kill 4242``) is everyday
work. A kill is *mass* when it reaches every process (``killall5``, ``kill 1``,
``kill 0``, ``pkill -u $USER`` without a pattern, a pattern such as ``.`` that
matches most programs) and *self* when its pattern matches the worker's own
processes (``sbx worker``, its Celery pool, its Redis or RabbitMQ broker) or
stops them through their own tools. Patterns are tested the way ``pgrep``
tests them: a regular expression searched in the process name, or in the
whole command line with ``-f``; ``killall`` compares whole names.
"""

from __future__ import annotations

import re

from registry.approval.rules.base import Pattern
from registry.approval.shell.args import operands, short_flags, subcommand
from registry.approval.shell.parse import parse_script
from registry.approval.shell.resolve import Cmd, resolve

__all__ = ["KILL_PATTERNS"]

# Representative names / command lines of the worker's processes.
_SELF_NAMES = ("sbx", "python3", "python", "celery", "redis-server", "rabbitmq-server", "beam.smp")
_SELF_CMDLINES = (
    "/usr/bin/python3 /usr/local/bin/sbx worker --concurrency 4",
    "python3 -m worker.cli.main worker",
    "celery -A worker.app worker --pool threads",
    "redis-server unixsocket:/home/user/.local/state/sbx/redis.sock",
    "/usr/lib/erlang/erts/bin/beam.smp -- -root /usr/lib/erlang -- rabbit",
)
# Unrelated programs: a pattern matching most of them is a mass kill.
_OTHER_NAMES = ("bash", "sshd", "systemd", "init", "node", "nginx", "postgres", "dockerd",
                "cron", "sleep", "java", "containerd")  # fmt: skip
_PKILL_ARG_OPTS = frozenset("sguUPtFGJn")
_KILLALL_ARG_OPTS = frozenset("suyoVn")


def _compile(pattern: str, exact: bool, ignore_case: bool) -> re.Pattern[str]:
    flags = re.IGNORECASE if ignore_case else 0
    try:
        rx = re.compile(f"^(?:{pattern})$" if exact else pattern, flags)
    except re.error:
        rx = re.compile(("^%s$" if exact else "%s") % re.escape(pattern), flags)
    return rx


def _classify(patterns: list[str], full: bool, exact: bool, ignore_case: bool) -> str:
    """``self``, ``mass`` or ``named`` for a pgrep/killall selection."""
    for pattern in patterns:
        rx = _compile(pattern, exact, ignore_case)
        if sum(1 for n in _OTHER_NAMES if rx.search(n)) >= 4:
            return "mass"
        samples = _SELF_CMDLINES if full else _SELF_NAMES
        if any(rx.search(s) for s in samples):
            return "self"
    return "named"


def _selection(cmd: Cmd) -> str | None:
    """How a pkill/pgrep/killall command selects its victims; None if it is not one."""
    name, args = cmd.name, cmd.args
    flags = short_flags(args)
    if name in ("pkill", "pgrep", "skill", "snice"):
        patterns = operands(args, _PKILL_ARG_OPTS)
        if not patterns:
            return "mass" if {"u", "U", "g", "G", "s", "t"} & flags else "named"
        return _classify(patterns, "f" in flags, "x" in flags, "i" in flags)
    if name == "killall":
        patterns = operands(args, _KILLALL_ARG_OPTS)
        if not patterns:
            return "mass" if {"u"} & flags else "named"
        regex = "r" in flags
        return (
            _classify(patterns, False, True, "I" in flags)
            if regex
            else _classify([re.escape(p) for p in patterns], False, True, "I" in flags)
        )
    if name == "pidof":
        return _classify([re.escape(p) for p in operands(args)], False, True, False)
    return None


def _substituted_selection(cmd: Cmd) -> set[str]:
    """Selections of pgrep/pidof substitutions in a ``kill`` command's arguments."""
    out: set[str] = set()
    for subs in cmd.subs[1:]:
        for sub in subs:
            for pipeline in parse_script(sub, max_items=256).pipelines:
                for sc in pipeline:
                    inner = resolve(sc.words, sc.redirects)
                    sel = _selection(inner) if inner is not None else None
                    if sel:
                        out.add(sel)
    return out


def _kill_pids(args: list[str]) -> list[str]:
    i = 0
    if args and args[0] in ("-s", "-n", "--signal"):
        i = 2
    elif args and args[0].startswith("-") and args[0] != "--" and len(args) > 1:
        i = 1
    return [a for a in args[i:] if a != "--"]


def _mass_kill(cmd: Cmd) -> bool:
    name = cmd.name
    if name in ("killall5", "slay"):
        return True
    if name == "kill":
        # pid 1 is init (in a container: the container itself); 0 is the caller's own group.
        if any(p in ("1", "0") for p in _kill_pids(cmd.args)):
            return True
        return "mass" in _substituted_selection(cmd)
    if name == "taskkill":
        return any(a in ("*", "*.*") for a in cmd.args) or "/fi" in (a.lower() for a in cmd.args)
    if name == "stop-process":
        return any("*" in a for a in cmd.args)
    return name != "pgrep" and _selection(cmd) == "mass"


def _worker_self_kill(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if name == "kill":
        return "self" in _substituted_selection(cmd)
    if name in ("rabbitmqctl", "rabbitmq-server"):
        return subcommand(args)[1] in ("stop", "stop_app", "shutdown", "reset", "force_reset")
    if name == "celery":
        ops = [a for a in args if not a.startswith("-")]
        return "control" in ops and any(o in ("shutdown", "pool_shrink") for o in ops)
    if name == "sbx":
        return False
    return name not in ("pgrep", "pidof") and _selection(cmd) == "self"


def _any_named_kill(cmd: Cmd) -> bool:
    return cmd.name in ("pkill", "killall", "skill", "taskkill", "stop-process")


KILL_PATTERNS: list[Pattern] = [
    Pattern(
        "mass_kill",
        _mass_kill,
        "kill every process or a whole user's (killall5, kill 1, pkill -u USER, pkill .)",
        _any_named_kill,
        names=frozenset(
            {
                "killall5",
                "slay",
                "kill",
                "taskkill",
                "stop-process",
                "pkill",
                "killall",
                "skill",
                "snice",
                "pidof",
            }
        ),
    ),
    Pattern(
        "worker_self_kill",
        _worker_self_kill,
        "kill or stop the worker's own processes (sbx worker, its Celery pool or broker)",
        names=frozenset(
            {
                "kill",
                "rabbitmqctl",
                "rabbitmq-server",
                "celery",
                "pkill",
                "killall",
                "skill",
                "snice",
            }
        ),
    ),
]
