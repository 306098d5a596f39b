"""The on-disk cap of background processes' output files.

A process's output file keeps at most ``cap`` bytes on disk: the newest. A
sweep on the registry's watcher thread punches a hole over the file's head
(:meth:`~environments.base.Environment.trim_output_head`): the file keeps its
size, so byte offsets stay valid for readers, and the process, which appends,
is undisturbed. Which bytes are gone is a pure function of the file's size
(:func:`~environments.base.discard_boundary`), so readers on any worker, and
after adoption, agree with the sweeper without sharing state.

Contracts:

* Sweeps run while the process is tracked (started or adopted), every
  20 ms-1 s locally and 0.5-5 s in remote sandboxes (each is a helper exec
  there), sooner the faster the file grows; once more when it ends, before the
  receipt is drafted. Between two sweeps a file can exceed the cap by what the
  process writes meanwhile; while no worker tracks it, it is not swept at all.
* A sandbox that cannot punch holes (busybox ``fallocate``, some file systems)
  is found by the first sweep's probe: sweeping stops, readers then read the
  whole file (nothing was discarded) and the process info says
  ``output_cap_enforced: false``.
* Readers never get bytes of a hole: see
  :meth:`~environments.base.Environment.read_output`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tracking import Tracked

log = logging.getLogger(__name__)

DEFAULT_PROCESS_OUTPUT_CAP = 64 * 1024 * 1024
MIN_PROCESS_OUTPUT_CAP = 256 * 1024
"""Smallest cap besides 0 (unlimited): four discard units, so the kept window is never
thinner than 192 KiB (a process info's tail and a receipt's excerpt fit in it)."""

LINE_SEARCH = 4096
"""How far a read that starts at the discard boundary looks for the next line start."""

Schedule = Callable[[float, Callable[[], None]], None]


def validate_cap(cap: int) -> int:
    """``cap`` if it is 0 (unlimited) or at least :data:`MIN_PROCESS_OUTPUT_CAP`."""
    if cap != 0 and cap < MIN_PROCESS_OUTPUT_CAP:
        raise ValueError(
            f"process output cap must be 0 (unlimited) or >= {MIN_PROCESS_OUTPUT_CAP} bytes"
        )
    return cap


def lead_cut(data: bytes, *, line: bool) -> int:
    """Bytes to skip at the start of ``data`` read from the discard boundary (mid-stream).

    With ``line``: up to the next line start when one is near, so a secret on
    the cut line is never shown in part (the redactor recognises whole ones
    only). Otherwise, or with no newline near: past UTF-8 continuation bytes,
    so no text starts inside a sequence.
    """
    if line:
        nl = data.find(b"\n", 0, LINE_SEARCH)
        if nl >= 0:
            return nl + 1
    i = 0
    while i < min(3, len(data)) and data[i] & 0xC0 == 0x80:
        i += 1
    return i


@dataclass
class CapState:
    """The cap of one tracked process and what sweeping it has shown."""

    cap: int
    """Bytes kept on disk; 0: unlimited."""
    enforced: bool | None = None
    """False: its sandbox cannot punch holes; None: not known yet."""
    size: int = 0
    """File size at the last sweep."""
    swept_at: float = 0.0
    """``time.monotonic()`` of the last sweep (0: none yet)."""

    def read_cap(self) -> int:
        """The cap readers apply: 0 (read it all) once we know nothing is ever discarded."""
        return 0 if self.enforced is False else self.cap


class OutputCapSweeper:
    """Schedules the sweeps of tracked processes' output files (module docstring)."""

    def __init__(
        self,
        schedule: Schedule,
        *,
        local_delays: tuple[float, float] = (0.02, 1.0),
        remote_delays: tuple[float, float] = (0.5, 5.0),
    ) -> None:
        """``schedule(delay, callback)`` runs ``callback`` later on one thread
        (:meth:`~process_registry.watcher.ExitWatcher.schedule`)."""
        self._schedule = schedule
        self._local = local_delays
        self._remote = remote_delays

    def start(self, t: Tracked) -> None:
        """Sweep ``t``'s output file from now on until it ends (nothing for no cap)."""
        if t.cap.cap > 0:
            self._schedule(0.0, lambda: self._tick(t))

    def final(self, t: Tracked) -> None:
        """One last sweep of an ended process (before its receipt); never raises."""
        if t.cap.cap > 0 and t.cap.enforced is not False:
            self.sweep(t)

    def _tick(self, t: Tracked) -> None:
        if t.done.is_set() or t.finalizing:
            return
        delay = self.sweep(t)
        if delay is not None and not (t.done.is_set() or t.finalizing):
            self._schedule(delay, lambda: self._tick(t))

    def sweep(self, t: Tracked) -> float | None:
        """Trim ``t``'s output file once; the delay until the next sweep (None: stop)."""
        state = t.cap
        lo, hi = self._local if t.env.processes_on_worker_host else self._remote
        try:
            trim = t.env.trim_output_head(
                t.record.output_path, state.cap, probe=state.enforced is None
            )
        except Exception as exc:
            # Missing file (not there yet, or removed), a sandbox that is away: try later.
            log.debug("output cap sweep of %s failed: %s", t.record.process_id, exc)
            return hi
        if trim.supported is False:
            state.enforced = False
            log.warning(
                "process %s: its %s sandbox cannot punch holes (no util-linux fallocate or "
                "no support in its file system): its output file is not bounded on disk",
                t.record.process_id,
                t.record.backend,
            )
            return None
        if trim.supported:
            state.enforced = True
        now = time.monotonic()
        grown, elapsed = trim.size - state.size, now - state.swept_at
        first = state.swept_at == 0.0
        state.size, state.swept_at = trim.size, now
        if first:
            return lo
        if grown <= 0:
            return hi
        # Sweep about when a quarter of the cap will have been written since this one.
        return min(hi, max(lo, elapsed * (state.cap / 4) / grown))
