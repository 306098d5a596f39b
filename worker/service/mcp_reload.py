"""MCP server changes in config.yaml, taken by a running worker without a restart.

A :class:`McpConfigWatcher` owns the worker's MCP wiring
(:func:`~worker.service.mcp.start_mcp`) and follows ``$SBX_HOME/config.yaml``: it
looks at the file every ``interval`` seconds (``SBX_MCP_RELOAD_INTERVAL``; 0: never)
and reloads once a change has settled (unchanged for one more look, so a file caught
half-written is not applied), and at once on SIGHUP -- which also reloads the approval
policy (``on_signal``), never reloaded by merely watching the file. A reload reads the settings
afresh (``SBX_*`` variables still win over the file) and applies the difference in
``mcp_servers``:

* a new or changed server is (re)configured: a changed one gets a new process, and
  one that now runs another program starts from that program's snapshot
  (:meth:`~registry.mcp.McpCatalog.reconfigure`);
* a disabled server's process is stopped and its tools leave the registry; enabling
  it again brings its cached tools back at once;
* a server removed from the file is stopped and its tools leave the registry.

Tool lists stay cache-only: a reload never waits on a server, refreshes run in the
background as at start-up. An invalid file is logged (where, never what) and changes
nothing. Only ``mcp_servers`` is reloaded; other settings need a restart.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from celery.signals import worker_ready

from worker.service.mcp import McpWiring, server_configs, start_mcp
from worker.settings import Settings

if TYPE_CHECKING:
    from registry.core import ToolRegistry

log = logging.getLogger(__name__)

Signature = tuple[int, int, int] | None


class McpConfigWatcher:
    """Follows the MCP servers of config.yaml for one worker (see module doc)."""

    def __init__(
        self,
        settings: Settings,
        registry: ToolRegistry | None = None,
        *,
        interval: float = 1.0,
        load: Callable[[], Settings] = Settings,
    ) -> None:
        self.path = settings.home / "config.yaml"
        self.interval = interval
        self._load = load
        self._registry = registry
        self._seen = self._pending = self._signature()
        self._servers = dict(settings.mcp_servers)
        self.wiring: McpWiring | None = start_mcp(settings, registry)
        self._lock = threading.Lock()  # one reload at a time
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sbx-mcp-config", daemon=True)
        self.on_signal: Callable[[], object] | None = None
        """Runs after a SIGHUP-requested reload too (what else the operator's signal
        reloads: the approval policy)."""

    def start(self) -> McpConfigWatcher:
        """Start following the file; SIGHUP reloads once the worker is ready."""
        self._thread.start()
        worker_ready.connect(self._take_sighup, weak=False)
        return self

    def request_reload(self) -> None:
        """Reload on the watcher's thread as soon as it wakes (safe from a signal handler)."""
        self._wake.set()

    def reload(self) -> bool:
        """Read the settings again and apply the MCP servers' changes; True if any.

        Never raises: an invalid configuration is logged and changes nothing.
        """
        with self._lock:
            try:
                fresh = self._load()
            except Exception as exc:
                log.warning("config.yaml not reloaded, MCP servers unchanged: %s", _why(exc))
                return False
            new = dict(fresh.mcp_servers)
            if new == self._servers:
                return False
            self._apply(fresh, new)
            self._servers = new
            return True

    def _apply(self, fresh: Settings, new: dict[str, Any]) -> None:
        from registry.core import registry as default_registry
        from registry.mcp import sync_mcp_tools_to_registry, unregister_server

        old = self._servers
        removed = sorted(set(old) - set(new))
        changed = sorted(sid for sid in new if old.get(sid) != new[sid])
        if self.wiring is None:
            self.wiring = start_mcp(fresh, self._registry)
        else:
            target = default_registry if self._registry is None else self._registry
            catalog = self.wiring.catalog
            for sid in removed:
                catalog.remove_server(sid)
                unregister_server(target, sid)
            for config in server_configs(fresh):
                if config.id in changed:
                    catalog.reconfigure(config)
            sync_mcp_tools_to_registry(target, catalog)  # cache only: never waits on a server
        log.info("MCP servers reloaded from config.yaml: %s changed or added, %s removed",
                 ",".join(changed) or "none", ",".join(removed) or "none")  # fmt: skip

    def close(self) -> None:
        """Stop following the file, then stop every MCP server process. Idempotent."""
        worker_ready.disconnect(self._take_sighup)
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        with self._lock:
            if self.wiring is not None:
                self.wiring.close()

    def _signature(self) -> Signature:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _run(self) -> None:
        while not self._stop.is_set():
            asked = self._wake.wait(self.interval or None)
            if self._stop.is_set():
                return
            if asked:
                self._wake.clear()
                self._seen = self._pending = self._signature()
                self._reload_logged()
                self._signalled()
                continue
            now = self._signature()
            if now == self._seen:
                continue
            if now == self._pending:  # unchanged since the last look: the write is done
                self._seen = now
                self._reload_logged()
            self._pending = now

    def _reload_logged(self) -> None:
        try:
            self.reload()
        except Exception:  # a broken server config must not end the watcher
            log.exception("reloading the MCP servers failed")

    def _signalled(self) -> None:
        if self.on_signal is None:
            return
        try:
            self.on_signal()
        except Exception:  # a failed reload keeps what is in force
            log.exception("reloading on SIGHUP failed")

    def _take_sighup(self, **_: Any) -> None:
        """SIGHUP reloads config.yaml (in place of Celery's restart by exec)."""
        if threading.current_thread() is not threading.main_thread():
            return
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGHUP, lambda *_: self.request_reload())


def _why(exc: Exception) -> str:
    """What is wrong with the configuration: where, never the value (it may be secret)."""
    from pydantic import ValidationError

    from worker.settings import SettingsError, problems_of

    if isinstance(exc, ValidationError):
        return problems_of(exc)
    return str(exc) if isinstance(exc, SettingsError) else type(exc).__name__


def watch_mcp_config(
    settings: Settings, on_signal: Callable[[], object] | None = None
) -> McpConfigWatcher:
    """The worker's MCP servers, following config.yaml from now on (see module doc);
    ``on_signal()`` runs too on SIGHUP (the approval policy's reload)."""
    watcher = McpConfigWatcher(settings, interval=settings.mcp_reload_interval)
    watcher.on_signal = on_signal
    return watcher.start()
