"""Facts about processes on this machine read from /proc (Linux)."""

from __future__ import annotations

from functools import lru_cache


def process_start_time(pid: int) -> int | None:
    """Kernel start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22).

    ``None`` when the process does not exist. The command name (field 2) may
    contain spaces and parentheses, so fields are counted after the last ``)``.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    rest = stat[stat.rfind(b")") + 2 :].split()
    # rest[0] is field 3 (state); field 22 is rest[19].
    try:
        return int(rest[19])
    except (IndexError, ValueError):
        return None


@lru_cache(maxsize=1)
def boot_id() -> str:
    """This boot's random id; a pid recorded under another boot id means nothing now."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return "unknown"
