"""Persisted MCP catalog snapshots, shared by every process of one ``SBX_HOME``.

Building a tool list never connects to an MCP server, so a process that has not
talked to a server (``sbx tools``, ``sbx doctor``, a worker just started) can
only know its tools from what another process saw. :class:`McpCacheStore` keeps,
per server id, the last good tool list and the last refresh error in one JSON
file (by default ``$SBX_HOME/mcp-cache.json``).

Contracts:

* The file is replaced atomically (:func:`process_registry.atomic.atomic_write`,
  mode 0600, never through a symlink). Every write is a read-modify-write under
  an exclusive ``flock`` on ``<file>.lock``, so concurrent writers (several
  workers, several refresh threads) never drop each other's entries.
* A success replaces the server's tools and clears its error; a failure records
  the error and keeps the last good tools (unless they belong to another
  configuration, see below).
* Each entry carries a fingerprint of the server's configuration (command,
  args and the *names* of its env variables, never their values). A reader uses
  an entry only when the fingerprint matches its own configuration: a
  reconfigured server counts as never warmed.
* Nothing secret is written: env values never are, and error texts and tool
  descriptions go through :func:`process_registry.redact.redact_text` first
  (docs/processes.md: no recognised secret in any file under ``SBX_HOME``).
* It is a cache, not a source of truth: a missing, corrupt or unsafe file reads
  as empty, and a failed write is logged, never raised to the refresh.

Format (``version`` 1)::

    {"version": 1, "servers": {"<id>": {"fingerprint": str,
        "tools": [{"name": str, "description": str, "input_schema": {...}}] | null,
        "refreshed_at": float | null, "error": str | null, "error_at": float | null}}}
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from process_registry.private_dirs import make_private_dirs

from .mcp_connections import McpServerConfig, McpToolSpec

__all__ = ["CACHE_FILE", "CachedServer", "McpCacheStore", "config_fingerprint"]

log = logging.getLogger(__name__)

CACHE_FILE = "mcp-cache.json"
_VERSION = 1


def config_fingerprint(server: McpServerConfig) -> str:
    """A digest of what decides a server's tools: command, args, env *names* (not values)."""
    material = json.dumps([server.command, list(server.args), sorted(server.env or {})])
    return hashlib.sha256(material.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class CachedServer:
    """One server's persisted state; ``tools`` is ``None`` when no refresh ever succeeded."""

    fingerprint: str
    tools: list[McpToolSpec] | None
    refreshed_at: float | None = None
    error: str | None = None
    error_at: float | None = None


class McpCacheStore:
    """The snapshot file at ``path`` (see module doc). Thread- and process-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def load(self) -> dict[str, CachedServer]:
        """Every readable entry by server id; ``{}`` for a missing or unreadable file."""
        return {sid: entry for sid, entry in self._read().items() if entry is not None}

    def entry_for(self, server: McpServerConfig) -> CachedServer | None:
        """``server``'s entry when it was written for the same configuration, else ``None``."""
        entry = self.load().get(server.id)
        if entry is None or entry.fingerprint != config_fingerprint(server):
            return None
        return entry

    def record_success(self, server: McpServerConfig, tools: list[McpToolSpec]) -> None:
        """Persist ``tools`` as ``server``'s last good list and clear its error."""
        entry = CachedServer(config_fingerprint(server), tools, refreshed_at=time.time())
        self._update(server.id, lambda _old: entry)

    def record_failure(self, server: McpServerConfig, error: str) -> None:
        """Persist ``error`` as ``server``'s last refresh error, keeping its last good tools."""
        fingerprint = config_fingerprint(server)

        def merge(old: CachedServer | None) -> CachedServer:
            same = old is not None and old.fingerprint == fingerprint
            return CachedServer(
                fingerprint,
                old.tools if same and old is not None else None,
                refreshed_at=old.refreshed_at if same and old is not None else None,
                error=error,
                error_at=time.time(),
            )

        self._update(server.id, merge)

    # --- file handling ---------------------------------------------------------------

    def _update(
        self, server_id: str, change: Callable[[CachedServer | None], CachedServer]
    ) -> None:
        try:
            with self._lock, self._file_lock():
                entries = self._read()
                entries[server_id] = change(entries.get(server_id))
                self._write(entries)
        except Exception as exc:  # a cache write must never fail a refresh
            log.warning("could not write the MCP cache %s: %s", self.path, exc)

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        make_private_dirs(self.path.parent)
        lock_path = self.path.with_name(self.path.name + ".lock")
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(lock_path, flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the flock

    def _read(self) -> dict[str, CachedServer | None]:
        from process_registry.atomic import read_nofollow

        try:
            doc = json.loads(read_nofollow(self.path))
        except FileNotFoundError:
            return {}
        except Exception as exc:  # corrupt or unsafe: start over rather than fail
            log.warning("ignoring unreadable MCP cache %s: %s", self.path, exc)
            return {}
        if not isinstance(doc, dict) or doc.get("version") != _VERSION:
            return {}  # another format: rewritten from scratch by the next write
        servers = doc.get("servers")
        if not isinstance(servers, dict):
            return {}
        return {str(sid): _decode(raw) for sid, raw in servers.items()}

    def _write(self, entries: dict[str, CachedServer | None]) -> None:
        from process_registry.atomic import atomic_write

        servers = {sid: _encode(e) for sid, e in sorted(entries.items()) if e is not None}
        data = json.dumps({"version": _VERSION, "servers": servers}, ensure_ascii=False, indent=1)
        atomic_write(self.path.parent, self.path.name, data.encode())


def _encode(entry: CachedServer) -> dict[str, Any]:
    from process_registry.redact import redact_text

    tools = None
    if entry.tools is not None:
        tools = [
            {"name": t.name, "description": redact_text(t.description),
             "input_schema": _redact_strings(t.input_schema)}
            for t in entry.tools
        ]  # fmt: skip
    return {
        "fingerprint": entry.fingerprint,
        "tools": tools,
        "refreshed_at": entry.refreshed_at,
        "error": None if entry.error is None else redact_text(entry.error),
        "error_at": entry.error_at,
    }


def _redact_strings(value: Any) -> Any:
    """``value`` (a JSON schema) with every string redacted: defaults and examples may
    carry a server's credentials, and this file lives under SBX_HOME."""
    from process_registry.redact import redact_text

    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _redact_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_strings(v) for v in value]
    return value


def _decode(raw: Any) -> CachedServer | None:
    """One entry, or ``None`` when it is malformed (it is then dropped on the next write)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("fingerprint"), str):
        return None
    tools: list[McpToolSpec] | None = None
    raw_tools = raw.get("tools")
    if isinstance(raw_tools, list):
        tools = []
        for t in raw_tools:
            if not isinstance(t, dict) or not isinstance(t.get("name"), str):
                return None
            schema = t.get("input_schema")
            tools.append(McpToolSpec(
                t["name"], str(t.get("description") or ""),
                dict(schema) if isinstance(schema, dict) else {},
            ))  # fmt: skip
    elif raw_tools is not None:
        return None
    error = raw.get("error")
    return CachedServer(
        raw["fingerprint"], tools,
        refreshed_at=_number(raw.get("refreshed_at")),
        error=error if isinstance(error, str) else None,
        error_at=_number(raw.get("error_at")),
    )  # fmt: skip


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
