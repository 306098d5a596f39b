"""What the in-sandbox helper scripts (:mod:`environments.shell.helper`) are given and
answer: the EXPORTS argument of a spawn, and their printed answers parsed."""

from __future__ import annotations

from environments.shell.framing import shell_quote


def exports(env: dict[str, str]) -> str:
    """``export NAME='value'`` lines: a spawn script's EXPORTS argument."""
    return "\n".join(f"export {k}={shell_quote(v)}" for k, v in env.items())


def parse_stat(line: str) -> tuple[str, int, int] | None:
    """``(state, pgid, start_time)`` from a ``/proc/<pid>/stat`` line, ``None`` if malformed."""
    rest = line[line.rfind(")") + 2 :].split()
    try:
        return rest[0], int(rest[2]), int(rest[19])
    except (IndexError, ValueError):
        return None


def parse_kill_output(text: str) -> tuple[set[int], set[int]]:
    """``(every pid considered, live pids signalled)`` from a ``KILL_TREE`` run."""
    seen: set[int] = set()
    alive: set[int] = set()
    for line in text.splitlines():
        for prefix, into in (("sbx-pids", seen), ("sbx-alive", alive)):
            if line.startswith(prefix):
                into.update(int(p) for p in line[len(prefix) :].split() if p.isdigit())
    return seen, alive


def parse_spawn_output(text: str) -> tuple[int, int, int | None] | None:
    """``(pid, pgid, start_time)`` from a spawn script's output; ``None`` if it did not start."""
    pid: int | None = None
    mode = ""
    stat: tuple[str, int, int] | None = None
    for line in text.splitlines():
        if line.startswith("sbx-spawn "):
            parts = line.split()
            if len(parts) == 3 and parts[2].isdigit():
                mode, pid = parts[1], int(parts[2])
        elif line.startswith("sbx-stat "):
            stat = parse_stat(line[len("sbx-stat ") :])
    if pid is None:
        return None
    # With setsid the process leads its own group; otherwise trust what /proc said.
    pgid = pid if mode == "setsid" or stat is None else stat[1]
    return pid, pgid, stat[2] if stat else None
