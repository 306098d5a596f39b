"""One thread that notices when tracked processes end, and runs timers.

Local processes are watched through pidfds in one epoll set: the kernel makes
a pidfd readable the moment its process exits, so an exit is seen in
microseconds and costs nothing while processes run (no per-process thread,
no sleep loop). Processes of other backends (or when pidfd is unavailable)
are polled with ``Environment.is_running`` every ``poll_interval`` seconds.

Callbacks run on the watcher thread, one at a time; an exception in a
callback is logged and never stops the thread.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from environments.base import Environment, SpawnedProcess
from environments.procinfo import process_start_time

log = logging.getLogger(__name__)

ExitCallback = Callable[[str, int | None], None]
"""``on_exit(key, wait_status)``: wait_status is the shell-style exit code (128+N for
signal N) when the process was our child and could be reaped, else None."""


@dataclass
class _Polled:
    env: Environment
    process: SpawnedProcess


class ExitWatcher:
    """Reports each watched process's end exactly once to ``on_exit``."""

    def __init__(self, on_exit: ExitCallback, *, poll_interval: float = 0.05) -> None:
        self._on_exit = on_exit
        self._poll_interval = poll_interval
        self._lock = threading.Lock()
        self._epoll = select.epoll()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._epoll.register(self._wake_r, select.EPOLLIN)
        self._fds: dict[int, str] = {}
        self._keys: dict[str, int] = {}
        self._polled: dict[str, _Polled] = {}
        self._failing: set[str] = set()
        """Polled keys whose last ``is_running`` raised (logged once, not every poll)."""
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="sbx-exit-watcher", daemon=True)
        self._thread.start()

    def watch(self, key: str, env: Environment, process: SpawnedProcess, *, local: bool) -> None:
        """Start watching ``process``; ``local`` means its pid is on this machine."""
        if local and self._watch_pidfd(key, process):
            return
        with self._lock:
            self._polled[key] = _Polled(env, process)
        self._wake()

    def _watch_pidfd(self, key: str, process: SpawnedProcess) -> bool:
        try:
            fd = os.pidfd_open(process.pid)
        except ProcessLookupError:
            # Already ended and reaped. Report on the watcher thread, never the caller's:
            # the exit handler may wait for the caller (the registry's checkpoint write).
            self.schedule(0.0, lambda: self._report(key, None))
            return True
        except OSError:
            return False  # no pidfd support, or out of fds: fall back to polling
        # The pid may have been recycled between spawn and pidfd_open.
        if process.start_time is not None and process_start_time(process.pid) != process.start_time:
            os.close(fd)
            self.schedule(0.0, lambda: self._report(key, None))
            return True
        with self._lock:
            self._fds[fd] = key
            self._keys[key] = fd
            self._epoll.register(fd, select.EPOLLIN)
        return True

    def unwatch(self, key: str) -> None:
        """Stop watching ``key`` (no report will follow)."""
        with self._lock:
            self._polled.pop(key, None)
            self._failing.discard(key)
            fd = self._keys.pop(key, None)
            if fd is not None:
                self._fds.pop(fd, None)
                with contextlib.suppress(OSError):
                    self._epoll.unregister(fd)
                os.close(fd)

    def schedule(self, delay: float, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the watcher thread after ``delay`` seconds."""
        with self._lock:
            heapq.heappush(self._timers, (time.monotonic() + delay, next(self._seq), callback))
        self._wake()

    def close(self) -> None:
        """Stop the thread; watched processes keep running."""
        self._stopped = True
        self._wake()
        self._thread.join(timeout=5)
        with self._lock:
            for fd in list(self._fds):
                os.close(fd)
            self._fds.clear()
            self._keys.clear()
        self._epoll.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"x")

    def _timeout(self) -> float:
        now = time.monotonic()
        with self._lock:
            waits = [self._timers[0][0] - now] if self._timers else []
            if self._polled:
                waits.append(self._poll_interval)
        return max(0.0, min(waits)) if waits else -1.0

    def _run(self) -> None:
        next_poll = 0.0
        while not self._stopped:
            try:
                events = self._epoll.poll(self._timeout())
            except InterruptedError:
                continue
            except (OSError, ValueError):
                return  # closed under us
            for fd, _ in events:
                if fd == self._wake_r:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(self._wake_r, 4096):
                            pass
                    continue
                self._pidfd_ready(fd)
            now = time.monotonic()
            if now >= next_poll:
                next_poll = now + self._poll_interval
                self._poll_backends()
            self._fire_timers()

    def _pidfd_ready(self, fd: int) -> None:
        with self._lock:
            key = self._fds.pop(fd, None)
            if key is None:
                return
            self._keys.pop(key, None)
            with contextlib.suppress(OSError):
                self._epoll.unregister(fd)
        code: int | None = None
        try:
            # Reap our own child to learn its true status (and leave no zombie).
            info = os.waitid(os.P_PIDFD, fd, os.WEXITED | os.WNOHANG)
            if info is not None:
                code = info.si_status if info.si_code == os.CLD_EXITED else 128 + info.si_status
        except ChildProcessError:
            pass  # not our child (adopted), or already reaped elsewhere
        finally:
            os.close(fd)
        self._report(key, code)

    def _poll_backends(self) -> None:
        with self._lock:
            polled = list(self._polled.items())
        for key, entry in polled:
            try:
                running = entry.env.is_running(entry.process)
            except Exception as exc:
                # The sandbox cannot answer now (a host out of reach): the process is not
                # taken for ended, and is asked after again at the next poll.
                if key not in self._failing:
                    self._failing.add(key)
                    log.warning("cannot tell whether %s still runs (asking again): %s", key, exc)
                continue
            if key in self._failing:
                self._failing.discard(key)
                log.info("%s answers again", key)
            if not running:
                with self._lock:
                    if self._polled.pop(key, None) is None:
                        continue
                self._report(key, None)

    def _fire_timers(self) -> None:
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._timers or self._timers[0][0] > now:
                    return
                _, _, callback = heapq.heappop(self._timers)
            try:
                callback()
            except Exception:
                log.exception("watcher timer failed")

    def _report(self, key: str, code: int | None) -> None:
        try:
            self._on_exit(key, code)
        except Exception:
            log.exception("exit handler failed for %s", key)
