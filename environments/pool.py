"""Sandboxes kept per (session, backend) and reused across calls.

Calls of one session are serialised on that session's sandbox; calls of
different sessions run in parallel. Two threads asking for the same new
sandbox create it once. Idle sandboxes are closed after ``idle_ttl`` seconds
unless their owner says they must stay (they hold running processes).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from environments.base import Environment
from environments.config import BackendConfig
from environments.registry import backend_class

log = logging.getLogger(__name__)

EnvironmentFactory = Callable[[str, str], Environment]
"""``factory(backend, session_id)`` creates a sandbox."""

ConfigLookup = Callable[[str], BackendConfig]
"""``configs(backend)``: the validated config of a backend."""


def default_configs(backend: str) -> BackendConfig:
    """The backend's defaults (the worker passes its settings' configs instead)."""
    return backend_class(backend).config_model()


@dataclass
class _Slot:
    lock: threading.Lock = field(default_factory=threading.Lock)
    env: Environment | None = None
    last_used: float = field(default_factory=time.monotonic)
    busy: int = 0
    resting: bool = False


class SandboxPool:
    """Thread-safe map from (session, backend) to a live sandbox."""

    def __init__(
        self,
        factory: EnvironmentFactory | None = None,
        *,
        configs: ConfigLookup = default_configs,
        idle_ttl: float = 3600.0,
        shell_idle_ttl: float = 300.0,
        keep_alive: Callable[[str, str], bool] | None = None,
        served_elsewhere: Callable[[str], bool] | None = None,
        on_released: Callable[[str, str], None] | None = None,
        on_created: Callable[[str, Environment], None] | None = None,
    ) -> None:
        self.config_for = configs
        """``config_for(backend)``: the config sandboxes of ``backend`` are created with."""
        self._factory = factory or self._create
        self.idle_ttl = idle_ttl
        self.shell_idle_ttl = shell_idle_ttl
        """A sandbox idle this long rests (its shell ends, its state stays)."""
        self.keep_alive: Callable[[str, str], bool] = keep_alive or (lambda sid, backend: False)
        """``keep_alive(session_id, backend)``: True keeps an idle sandbox open."""
        self.served_elsewhere: Callable[[str], bool] = served_elsewhere or (lambda sid: False)
        """``served_elsewhere(session_id)``: another worker serves the session now, so an
        idle sandbox of it here is detached (its shell ended), never removed."""
        self.on_released = on_released
        """``on_released(session_id, backend)`` runs after an idle sandbox was let go."""
        self.on_created = on_created
        """``on_created(backend, env)`` runs once for each sandbox the pool creates, before its
        first use (holding that session's turn); its errors are logged, never raised."""
        self._slots: dict[tuple[str, str], _Slot] = {}
        self._seen_backends: set[str] = set()
        self._guard = threading.Lock()

    def _create(self, backend: str, session_id: str) -> Environment:
        return backend_class(backend)(session_id, self.config_for(backend))

    @contextlib.contextmanager
    def use(self, session_id: str, backend: str) -> Iterator[Environment]:
        """Exclusive use of the session's sandbox for the duration of the block."""
        key = (session_id, backend)
        with self._guard:
            slot = self._slots.setdefault(key, _Slot())
            slot.busy += 1
            self._seen_backends.add(backend)
        try:
            with slot.lock:
                if slot.env is None:
                    slot.env = self._factory(backend, session_id)
                    self._created(backend, slot.env)
                slot.last_used = time.monotonic()
                slot.resting = False
                yield slot.env
                slot.last_used = time.monotonic()
        finally:
            with self._guard:
                slot.busy -= 1

    def _created(self, backend: str, env: Environment) -> None:
        if self.on_created is not None:
            try:
                self.on_created(backend, env)
            except Exception:
                log.warning("on_created failed for a %s sandbox", backend, exc_info=True)

    def get_existing(self, session_id: str, backend: str) -> Environment | None:
        """The live sandbox for the key, without creating one."""
        slot = self._slots.get((session_id, backend))
        return slot.env if slot else None

    def reap_idle(self, now: float | None = None) -> int:
        """Close sandboxes idle for longer than ``idle_ttl``; return how many were closed."""
        now = time.monotonic() if now is None else now
        victims: list[tuple[tuple[str, str], _Slot]] = []
        with self._guard:
            for key, slot in list(self._slots.items()):
                if slot.busy or now - slot.last_used < self.idle_ttl:
                    continue
                if self.keep_alive(*key):
                    continue
                victims.append((key, slot))
                del self._slots[key]
        for (session_id, backend), slot in victims:
            if slot.env is not None:
                with contextlib.suppress(Exception):
                    if self.served_elsewhere(session_id):
                        slot.env.detach()
                    else:
                        slot.env.close()
            if self.on_released is not None:
                with contextlib.suppress(Exception):
                    self.on_released(session_id, backend)
        return len(victims)

    def rest_idle(self, now: float | None = None) -> int:
        """Let sandboxes idle for longer than ``shell_idle_ttl`` rest (see
        :meth:`~environments.base.Environment.rest`); how many did."""
        now = time.monotonic() if now is None else now
        with self._guard:
            tired = [
                slot
                for slot in self._slots.values()
                if not slot.busy and not slot.resting and slot.env is not None
                and now - slot.last_used >= self.shell_idle_ttl
            ]  # fmt: skip
        rested = 0
        for slot in tired:
            if not slot.lock.acquire(blocking=False):
                continue  # a call just started: it is not idle
            try:
                if slot.env is not None and not slot.resting:
                    with contextlib.suppress(Exception):
                        slot.env.rest()
                    slot.resting = True
                    rested += 1
            finally:
                slot.lock.release()
        return rested

    def sessions(self) -> set[str]:
        """Sessions with a sandbox in this pool."""
        with self._guard:
            return {session_id for session_id, _ in self._slots}

    def close_all(self) -> None:
        """Close every sandbox."""
        for env in self._take_all():
            with contextlib.suppress(Exception):
                env.close()

    def detach_all(self) -> None:
        """Let go of every sandbox, leaving them to the workers that serve their sessions
        next (graceful worker shutdown)."""
        for env in self._take_all():
            with contextlib.suppress(Exception):
                env.detach()

    def _take_all(self) -> list[Environment]:
        with self._guard:
            slots = list(self._slots.values())
            self._slots.clear()
        return [slot.env for slot in slots if slot.env is not None]

    def live_by_backend(self) -> dict[str, int]:
        """How many sandboxes are open now, by backend."""
        counts: dict[str, int] = {}
        with self._guard:
            for (_, backend), slot in self._slots.items():
                if slot.env is not None:
                    counts[backend] = counts.get(backend, 0) + 1
        return counts

    def backends_in_use(self) -> set[str]:
        """Backends of the sandboxes this pool holds or has held."""
        with self._guard:
            return {backend for _, backend in self._slots} | self._seen_backends

    def __len__(self) -> int:
        return len(self._slots)
