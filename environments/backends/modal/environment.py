"""The ``modal`` backend: one Modal Sandbox per session, driven through one long-lived exec.

Each session gets a sandbox named after the session and the settings that
shaped it (unique among the App's running sandboxes), tagged ``sbx=1``,
``sbx.session``, ``sbx.worker``, ``sbx.config`` and ``sbx.active`` (the idle
clock of sweeps). It is created with the network blocked unless an outbound
allowlist is configured, cpu and memory reserved and limited, a hard lifetime
and an idle timeout. The session shell is one ``sb.exec("sh", ...)`` whose
stdin/stdout carry the framing of :mod:`environments.shell.driver`
(:mod:`.channel`). Modal has no per-command kill: a timed-out or cancelled
command's process group is killed inside the sandbox by the helper scripts
of :mod:`environments.shell.helper`, through short execs, which also run
background processes and move files (offsets and limits included, which the
SDK's filesystem API -- itself an exec of an in-sandbox tool -- lacks).

A new object for the same session finds the running sandbox again (by id
when given one, else by name); a sandbox that ended behind sbx's back
(terminated, expired) is replaced and the next call's output says so.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from environments.backends.naming import sandbox_name, worker_label
from environments.config import BackendConfig, config_of
from environments.errors import (
    AuthenticationFailed,
    CredentialsMissing,
    QuotaExceeded,
    SandboxDead,
    SandboxError,
    SandboxNotFound,
)
from environments.shell import helper as scripts
from environments.shell.driver import SessionShell
from environments.shell.environment import SandboxShellEnvironment
from environments.shell.pty_helper import HelperPtyOps
from environments.shell.script import start_script, started_shell_pid

from . import sdk
from .channel import ModalExecChannel
from .config import ModalConfig

_HELPER_TIMEOUT = 120.0
T = TypeVar("T")


class ModalEnvironment(HelperPtyOps, SandboxShellEnvironment):
    """One Modal Sandbox per session; see the module docstring."""

    backend = "modal"
    config_model = ModalConfig
    vanished_note = (
        "[sbx: the session's Modal sandbox had ended; a new one was created. "
        "Files and processes from before are lost.]\n"
    )

    def __init__(
        self, session_id: str, config: BackendConfig | None = None, *, sandbox_id: str | None = None
    ) -> None:
        """``sandbox_id``: the session's sandbox as recorded earlier (re-attach by id)."""
        super().__init__(session_id)
        self.config = config_of(ModalConfig, config)
        self.name = sandbox_name(session_id, self.config.fingerprint())
        self.where = f"Modal sandbox {self.name}"
        self._known_id = sandbox_id
        self._sandbox: sdk.Sandbox | None = None
        self._vanished = False
        self._closing = False
        self._channel: ModalExecChannel | None = None
        self._killed: dict[int, set[int]] = {}
        self._last_heartbeat = time.monotonic()
        self._quick = min(self.config.api_timeout, 30.0)
        """Deadline of a lookup, a poll, a tag update, a terminate."""
        self.shell = SessionShell(self._open, self._kill_group, kill_grace=self.config.kill_grace)

    # -- the sandbox ---------------------------------------------------------------------

    @property
    def sandbox_id(self) -> str:
        return str(self._sandbox.object_id) if self._sandbox is not None else self.name

    def attach(self) -> str:
        self._ensure(verify=self._sandbox is None)
        return self.sandbox_id

    def _client(self) -> Any:
        return sdk.client(self.config)

    def _call(self, coro: Coroutine[Any, Any, T], doing: str) -> T:
        """A quick SDK call (lookup, poll, tags, terminate) with its deadline."""
        return sdk.run(coro, self._quick, doing)

    def tags(self) -> dict[str, str]:
        """The tags of the session's sandbox as this worker writes them."""
        return {
            "sbx": "1",
            "sbx.session": self.session_id,
            "sbx.worker": worker_label(),
            "sbx.config": self.config.fingerprint(),
            "sbx.active": str(int(time.time())),
        }

    def _ensure(self, *, verify: bool) -> sdk.Sandbox:
        """The session's running sandbox: the known one, a found one, or a new one."""
        current = self._sandbox
        if current is not None:
            if not verify or not self._call(sdk.finished(current), "checking the sandbox"):
                return current
            self._forget(current)
            self._vanished = True
        found, existed = self._find()
        if found is None:
            found = self._create()
            self._vanished = self._vanished or existed
        self._sandbox = found
        return found

    def _find(self) -> tuple[sdk.Sandbox | None, bool]:
        """``(running sandbox or None, whether an ended one of this session was seen)``."""
        client, existed = self._client(), False
        if self._known_id is not None:
            known = self._call(sdk.from_id(client, self._known_id), "finding the sandbox")
            self._known_id = None
            if known is not None:
                if not self._call(sdk.finished(known), "checking the sandbox"):
                    return known, False
                existed = True
        named = self._call(sdk.from_name(self.config, client, self.name), "finding the sandbox")
        if named is None:
            return None, existed
        if self._call(sdk.finished(named), "checking the sandbox"):
            self._forget(named)
            return None, True
        return named, existed

    def _create(self) -> sdk.Sandbox:
        client = self._client()
        try:
            made = sdk.run(
                sdk.create(self.config, client, name=self.name, tags=self.tags()),
                self.config.api_timeout,
                "creating the sandbox",
            )
        except (QuotaExceeded, AuthenticationFailed, CredentialsMissing):
            raise  # refused: nothing was created
        except SandboxError:
            # The create may have gone through before the failure: nothing may stay running.
            self._terminate_named()
            raise
        if made is None:  # another worker created it first: use theirs
            made, _ = self._find()
            if made is None:
                raise SandboxDead(f"{self.where} was created elsewhere and is gone already")
        self._last_heartbeat = time.monotonic()
        return made

    def _terminate_named(self) -> None:
        with contextlib.suppress(SandboxError):
            named = self._call(sdk.from_name(self.config, self._client(), self.name), "cleaning up")
            if named is not None:
                self._call(sdk.terminate(named), "terminating the sandbox")

    def _forget(self, sandbox: sdk.Sandbox) -> None:
        if self._sandbox is sandbox:
            self._sandbox = None
        with contextlib.suppress(SandboxError):
            self._call(sdk.detach(sandbox), "detaching")

    # -- execs ---------------------------------------------------------------------------

    def _helper(
        self, script: str, args: list[str], stdin: bytes | None = None
    ) -> tuple[int, bytes]:
        sandbox = self._ensure(verify=False)
        try:
            return sdk.run(
                sdk.run_process(sandbox, ["sh", "-c", script, "sbx", *args], stdin),
                _HELPER_TIMEOUT,
                "running a helper command",
            )
        except SandboxNotFound as exc:
            # Forgotten, so that the next call finds it ended and makes a new one (the
            # next command says so) instead of asking the ended one again and again.
            self._forget(sandbox)
            raise SandboxDead(
                f"{self.where} has ended (nothing was done); the next call starts a new one"
            ) from exc

    def _open(self) -> ModalExecChannel:
        sandbox = self._ensure(verify=True)
        argv = ["sh", "-c", start_script(self.config.shell)]
        try:
            process = self._call(sdk.exec_process(sandbox, argv), "starting the shell")
        except SandboxNotFound as exc:
            raise SandboxDead(f"cannot start a shell in {self.where}: {exc}") from exc
        channel = ModalExecChannel(process)
        pid = started_shell_pid(channel, self.shell.start_timeout, self.where)
        channel.on_close = lambda: self._end_shell(channel, pid)
        self._channel = channel
        return channel

    def _end_shell(self, channel: ModalExecChannel, pid: int) -> None:
        # A shell whose stream is still open is killed with its tree: a wedged one
        # (stopped, say) would not end on the EOF the channel sends. Not when the
        # sandbox itself goes away next.
        if self._closing or channel.peer_gone:
            return
        with contextlib.suppress(SandboxError):
            self._helper(scripts.KILL_TREE, ["9", str(pid)])

    def _kill_group(self, pgid: int, signum: int) -> None:
        scripts.kill_tree(self._helper, self._killed, pgid, signum)

    def _heartbeat(self, force: bool = False) -> None:
        now = time.monotonic()
        sandbox = self._sandbox
        if sandbox is None or (
            not force and now - self._last_heartbeat < self.config.heartbeat_interval
        ):
            return
        self._last_heartbeat = now
        with contextlib.suppress(SandboxError):
            self._call(sdk.set_tags(sandbox, self.tags()), "refreshing the sandbox's tags")

    # -- the contract ------------------------------------------------------------------

    def _shell_stream_gone(self) -> bool:
        return self._channel is not None and self._channel.peer_gone

    def _check_sandbox(self) -> None:
        self._ensure(verify=True)

    def touch(self) -> None:
        """Refresh the sandbox's ``sbx.active`` tag (the idle clock of :func:`reap_orphans`)."""
        self._heartbeat(force=True)

    def close(self) -> None:
        """End the session shell; terminate the sandbox unless ``terminate_on_close`` is off."""
        self._closing = self.config.terminate_on_close
        self.shell.close()
        self._channel = None
        sandbox, self._sandbox = self._sandbox, None
        if not self.config.terminate_on_close:
            if sandbox is not None:
                self._forget(sandbox)
            return
        if sandbox is None:
            self._terminate_named()
            return
        with contextlib.suppress(SandboxError):
            self._call(sdk.terminate(sandbox), "terminating the sandbox")

    @classmethod
    def reap_orphans(
        cls, config: BackendConfig, max_idle: float, keep: Callable[[str], bool]
    ) -> list[str]:
        return reap_orphans(config_of(ModalConfig, config), max_idle, keep)

    @classmethod
    def availability(cls, config: BackendConfig | None = None) -> tuple[bool, str]:
        return availability(config_of(ModalConfig, config))


def availability(config: ModalConfig) -> tuple[bool, str]:
    """``(available, reason)``: credentials present, API reachable, credentials accepted."""
    try:
        sdk.credentials(config)
        url = sdk.server_url()
        sdk.check_reachable(url, min(config.connect_timeout, 5.0))
        sdk.run(sdk.hello(sdk.client(config)), 15.0, "checking the credentials")
    except SandboxError as exc:
        return False, str(exc)
    return True, f"Modal API at {url}, app {config.app_name!r}"


def reap_orphans(
    config: ModalConfig,
    max_idle: float,
    keep: Callable[[str], bool],
    *,
    now: float | None = None,
    tags: dict[str, str] | None = None,
) -> list[str]:
    """Terminate sbx's sandboxes of the configured App idle for more than ``max_idle``
    seconds (by their ``sbx.active`` tag) whose session ``keep(session_id)`` does not
    claim. ``tags`` narrows the sweep (say, to one worker's sandboxes); ``now`` is
    wall-clock seconds since the epoch. Returns the ids of the sandboxes terminated."""
    client = sdk.client(config)
    now = time.time() if now is None else now
    wanted = {"sbx": "1", **(tags or {})}
    quick = min(config.api_timeout, 30.0)

    async def tagged() -> list[tuple[sdk.Sandbox, dict[str, str]]]:
        return [(s, await sdk.get_tags(s)) async for s in sdk.listing(config, client, wanted)]

    removed: list[str] = []
    for sandbox, sandbox_tags in sdk.run(tagged(), config.api_timeout, "listing sandboxes"):
        try:
            active = float(sandbox_tags.get("sbx.active", "0"))
        except ValueError:
            active = 0.0
        if now - active <= max_idle or keep(sandbox_tags.get("sbx.session", "")):
            continue
        with contextlib.suppress(SandboxError):
            sdk.run(sdk.terminate(sandbox), quick, "terminating an orphaned sandbox")
            removed.append(str(sandbox.object_id))
    return removed
