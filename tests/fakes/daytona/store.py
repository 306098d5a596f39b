"""The fake Daytona's sandboxes: records, their DTOs and their lifecycle.

States follow Daytona's: ``started`` -> ``stopped`` -> ``archived``, and
``destroyed`` once deleted (a destroyed sandbox is gone from lists and gets).
Auto-stop, auto-archive and auto-delete happen when :meth:`Store.apply_lifecycle`
is called, against the store's clock (``time.time()`` plus ``clock_offset``), so
tests can move time forward without waiting.
"""

from __future__ import annotations

import datetime
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .jail import Jail

ORGANIZATION = "org-sbx-fake"
DEFAULT_SNAPSHOT = "daytonaio/sandbox:0.5.0"
MAX_ARCHIVE_MINUTES = 30 * 24 * 60


def iso(seconds: float) -> str:
    """Daytona's timestamp format (UTC, milliseconds, ``Z``)."""
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class ApiError(Exception):
    """An error answer of the API: HTTP status and message (Daytona's error envelope)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class FakeSandbox:
    """One sandbox as the API knows it."""

    id: str
    name: str
    labels: dict[str, str]
    env: dict[str, str]
    jail: Jail
    user: str = "daytona"
    snapshot: str | None = None
    dockerfile: str | None = None
    target: str = "us"
    cpu: int = 1
    memory: int = 1
    disk: int = 3
    public: bool = False
    network_block_all: bool = False
    network_allow_list: str | None = None
    domain_allow_list: str | None = None
    auto_stop_interval: int = 15
    auto_archive_interval: int = 7 * 24 * 60
    auto_delete_interval: int = -1
    state: str = "started"
    created_at: float = 0.0
    updated_at: float = 0.0
    last_activity: float = 0.0
    stopped_at: float = 0.0
    activity_refreshes: int = 0
    streams: int = 0
    """Open toolbox websockets: the proxy keeps refreshing activity while one is open."""
    extra: dict[str, Any] = field(default_factory=dict)

    def list_item(self, toolbox_url: str) -> dict[str, Any]:
        """The ``SandboxListItem`` JSON."""
        return {
            "id": self.id,
            "organizationId": ORGANIZATION,
            "name": self.name,
            "target": self.target,
            "state": self.state,
            "desiredState": "stopped" if self.state in ("stopped", "archived") else self.state,
            "snapshot": self.snapshot,
            "user": self.user,
            "public": self.public,
            "networkBlockAll": self.network_block_all,
            "networkAllowList": self.network_allow_list,
            "domainAllowList": self.domain_allow_list,
            "cpu": self.cpu,
            "gpu": 0,
            "memory": self.memory,
            "disk": self.disk,
            "labels": dict(self.labels),
            "autoStopInterval": self.auto_stop_interval,
            "autoArchiveInterval": self.auto_archive_interval,
            "autoDeleteInterval": self.auto_delete_interval,
            "createdAt": iso(self.created_at),
            "updatedAt": iso(self.updated_at),
            "lastActivityAt": iso(self.last_activity),
            "daemonVersion": "0.226.1-fake",
            "toolboxProxyUrl": toolbox_url,
        }

    def dto(self, toolbox_url: str) -> dict[str, Any]:
        """The full ``Sandbox`` JSON of a single-sandbox read."""
        return {**self.list_item(toolbox_url), "env": dict(self.env), "kvm": False, "volumes": []}


class Store:
    """Every sandbox of the fake, guarded by one lock; ``root`` holds their directories."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.lock = threading.RLock()
        self.sandboxes: dict[str, FakeSandbox] = {}
        self.clock_offset = 0.0

    def now(self) -> float:
        return time.time() + self.clock_offset

    def find(self, id_or_name: str) -> FakeSandbox:
        """The live sandbox with this id or name; :class:`ApiError` 404 otherwise."""
        with self.lock:
            sandbox = self.sandboxes.get(id_or_name)
            if sandbox is None:
                sandbox = next((s for s in self.sandboxes.values() if s.name == id_or_name), None)
            if sandbox is None or sandbox.state == "destroyed":
                raise ApiError(404, f"Sandbox with ID or name {id_or_name} not found")
            return sandbox

    def matching(self, labels: dict[str, str]) -> list[FakeSandbox]:
        """Live sandboxes carrying every one of ``labels``, oldest first."""
        with self.lock:
            found = [
                s
                for s in self.sandboxes.values()
                if s.state != "destroyed" and all(s.labels.get(k) == v for k, v in labels.items())
            ]
        return sorted(found, key=lambda s: s.created_at)

    def create(self, body: dict[str, Any]) -> FakeSandbox:
        """A new started sandbox from a ``CreateSandbox`` body."""
        sandbox_id = secrets.token_hex(16)
        name = body.get("name") or sandbox_id
        block = bool(body.get("networkBlockAll"))
        build = body.get("buildInfo") or {}
        now = self.now()
        delete = body.get("autoDeleteInterval")
        env = dict(body.get("env") or {})
        with self.lock:
            if any(s.name == name and s.state != "destroyed" for s in self.sandboxes.values()):
                raise ApiError(409, f"Sandbox with name {name} already exists")
            sandbox = FakeSandbox(
                id=sandbox_id,
                name=name,
                labels=dict(body.get("labels") or {}),
                env=env,
                jail=Jail(self.root / sandbox_id, name[:63], block_network=block, env=env),
                user=body.get("user") or "daytona",
                snapshot=None if build else (body.get("snapshot") or DEFAULT_SNAPSHOT),
                dockerfile=build.get("dockerfileContent"),
                target=body.get("target") or "us",
                cpu=int(body.get("cpu") or 1),
                memory=int(body.get("memory") or 1),
                disk=int(body.get("disk") or 3),
                public=bool(body.get("public")),
                network_block_all=block,
                network_allow_list=body.get("networkAllowList"),
                domain_allow_list=body.get("domainAllowList"),
                auto_stop_interval=_interval(body.get("autoStopInterval"), 15),
                auto_archive_interval=_interval(body.get("autoArchiveInterval"), 7 * 24 * 60),
                auto_delete_interval=-1 if delete is None else int(delete),
                created_at=now,
                updated_at=now,
                last_activity=now,
            )
            self.sandboxes[sandbox_id] = sandbox
        try:
            sandbox.jail.start()
        except Exception:
            with self.lock:
                del self.sandboxes[sandbox_id]
            sandbox.jail.destroy()
            raise
        return sandbox

    def start(self, sandbox: FakeSandbox) -> None:
        """Start a stopped or archived sandbox (its files are kept)."""
        with self.lock:
            if sandbox.state == "started":
                return
            if sandbox.state not in ("stopped", "archived"):
                raise ApiError(400, f"Sandbox is in state {sandbox.state} and cannot be started")
            sandbox.jail.start()
            sandbox.state = "started"
            sandbox.updated_at = sandbox.last_activity = self.now()

    def stop(self, sandbox: FakeSandbox) -> None:
        """Stop a sandbox: every process in it dies; ephemeral ones are deleted."""
        with self.lock:
            if sandbox.state in ("stopped", "archived"):
                return
            sandbox.jail.stop()
            sandbox.state = "stopped"
            sandbox.updated_at = sandbox.stopped_at = self.now()
            if sandbox.auto_delete_interval == 0:
                self.delete(sandbox)

    def archive(self, sandbox: FakeSandbox) -> None:
        with self.lock:
            if sandbox.state != "stopped":
                raise ApiError(400, "Sandbox must be stopped before it can be archived")
            sandbox.state = "archived"
            sandbox.updated_at = self.now()

    def delete(self, sandbox: FakeSandbox) -> None:
        with self.lock:
            sandbox.state = "destroyed"
            sandbox.updated_at = self.now()
        sandbox.jail.destroy()

    def refresh_activity(self, sandbox: FakeSandbox) -> None:
        with self.lock:
            sandbox.last_activity = self.now()
            sandbox.activity_refreshes += 1

    def apply_lifecycle(self) -> list[tuple[str, str]]:
        """Auto-stop, auto-archive and auto-delete what is due; ``(id, new state)`` pairs."""
        changes: list[tuple[str, str]] = []
        now = self.now()
        with self.lock:
            for s in list(self.sandboxes.values()):
                if s.streams:
                    s.last_activity = now
                idle = now - s.last_activity
                if s.state == "started" and 0 < s.auto_stop_interval * 60 < idle:
                    self.stop(s)
                    changes.append((s.id, s.state))
                    continue
                stopped_for = now - s.stopped_at
                if s.state == "stopped" and 0 <= s.auto_delete_interval * 60 <= stopped_for:
                    self.delete(s)
                    changes.append((s.id, s.state))
                    continue
                archive_after = (s.auto_archive_interval or MAX_ARCHIVE_MINUTES) * 60
                if s.state == "stopped" and now - s.stopped_at > archive_after:
                    self.archive(s)
                    changes.append((s.id, s.state))
        return changes

    def close(self) -> None:
        """Stop every sandbox and remove its files."""
        with self.lock:
            sandboxes = list(self.sandboxes.values())
        for s in sandboxes:
            s.jail.destroy()


def _interval(value: Any, default: int) -> int:
    return default if value is None else int(value)
