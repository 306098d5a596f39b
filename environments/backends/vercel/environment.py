"""The ``vercel_sandbox`` backend: one Vercel Sandbox per session, driven through one shell.

Each session gets a sandbox named after the session (and the settings that
shaped it), tagged ``sbx=1``, ``sbx-session=<id>``, ``sbx-worker=<host:pid>``,
created with no network unless an allowlist is configured, the configured
vCPUs/memory and an execution time limit that :meth:`VercelEnvironment.touch`
(and every call) extends while the session is in use. The session shell is one
long-lived SDK process (:mod:`.channel`) carrying the framing of
:mod:`environments.shell.driver`; killing a timed-out command's process group,
background processes and output windows go through the in-sandbox helper
scripts of :mod:`environments.shell.helper`, run as short SDK processes;
files move through the SDK's filesystem API.

A restarted worker finds the session's sandbox again by its name. A sandbox
found stopped is resumed (its files kept when it is persistent), one found gone
is recreated; the next result says so and reports the shell restarted.
:func:`reap_orphans` destroys sbx sandboxes left idle, found by their tags.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator

from environments.base import ExecResult
from environments.config import BackendConfig, config_of
from environments.errors import SandboxDead, SandboxError, SandboxNotFound, ServiceUnreachable
from environments.shell import helper as scripts
from environments.shell.driver import SessionShell
from environments.shell.environment import ShellEnvironment
from environments.shell.pty_helper import HelperPtyOps
from environments.shell.result import ShellResult

from .channel import VercelShellChannel, launch_args
from .config import VercelConfig, sandbox_name
from .sdk import Sandbox, VercelApi, resolve_credentials

log = logging.getLogger(__name__)

RESUMED_NOTE = (
    "[sbx: the session's sandbox had stopped; it was resumed and the shell restarted. "
    "Processes from before are gone.]\n"
)
VANISHED_NOTE = (
    "[sbx: the session's sandbox was gone; a new one was created. "
    "Files and processes from before are lost.]\n"
)
# Helper scripts whose output is file content: it crosses the text-only log stream as hex.
_BINARY_SCRIPTS = frozenset({scripts.READ_OUTPUT, scripts.READ_FILE})
_AS_HEX = (
    't=$(mktemp) || exit 47; s=$1; shift; sh -c "$s" sbx "$@" >"$t"; rc=$?; '
    'od -An -v -tx1 <"$t"; rm -f "$t"; exit $rc'
)


def _worker_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class VercelEnvironment(HelperPtyOps, ShellEnvironment):
    """One Vercel Sandbox per session; see the module docstring."""

    backend = "vercel_sandbox"
    config_model = VercelConfig

    def __init__(self, session_id: str, config: BackendConfig | None = None) -> None:
        super().__init__(session_id)
        self.config = config_of(VercelConfig, config)
        self.api = VercelApi(self.config)
        self.name = sandbox_name(session_id, self.config)
        self.where = f"Vercel sandbox {self.name}"
        self._sandbox: Sandbox | None = None
        self._runtime_session: str | None = None
        self._deadline: float | None = None
        self._note = ""
        self._closing = False
        self._channel: VercelShellChannel | None = None
        self._killed: dict[int, set[int]] = {}
        self.shell = SessionShell(self._open, self._kill_group, kill_grace=self.config.kill_grace)

    @property
    def sandbox_id(self) -> str:
        return self.name

    # -- the sandbox -------------------------------------------------------------

    def tags(self) -> dict[str, str]:
        return {
            "sbx": "1",
            "sbx-session": self.session_id,
            "sbx-worker": _worker_label(),
            "sbx-config": self.config.fingerprint(),
        }

    def _live(self) -> Sandbox:
        """The session's sandbox: found by name, resumed or created on first use."""
        if self._sandbox is None:
            self._attach()
        assert self._sandbox is not None
        return self._sandbox

    def _attach(self) -> None:
        sandbox = self.api.find(self.name)
        if sandbox is None:
            sandbox = self.api.create(self.name, self.tags())
            if sandbox is None:  # another worker created it first: use theirs
                sandbox = self.api.find(self.name)
                if sandbox is None:
                    raise SandboxError(f"{self.where} exists and yet cannot be found")
            elif self._runtime_session is not None:
                self._note = VANISHED_NOTE
        if self.api.is_stopped(sandbox):
            self.api.resume(sandbox)
            self._note = RESUMED_NOTE
        self._sandbox = sandbox
        self._runtime_session = self.api.session_id(sandbox)
        self._deadline = self.api.deadline(sandbox)

    def _open(self) -> VercelShellChannel:
        try:
            sandbox = self._live()
            process = self.api.start_shell(sandbox, self._launch())
        except SandboxNotFound:
            self._sandbox = None  # destroyed behind our back: recreate it
            sandbox = self._live()
            process = self.api.start_shell(sandbox, self._launch())
        if self.api.session_id(sandbox) != self._runtime_session:
            # The SDK resumed a sandbox that had stopped since the last call.
            self._runtime_session = self.api.session_id(sandbox)
            self._deadline = self.api.deadline(sandbox)
            self._note = self._note or RESUMED_NOTE
        channel = VercelShellChannel(self.api, process)
        line = channel.read_line(self.shell.start_timeout)
        pid = line.removeprefix(b"sbx-shell-pid ").strip()
        if not pid.isdigit():
            channel.close()
            raise SandboxDead(f"the shell in {self.where} did not start: {line[-200:]!r}")
        channel.on_close = lambda: self._release_shell(channel, int(pid))
        self._channel = channel
        return channel

    def _launch(self) -> list[str]:
        return launch_args(self.config.stream_encoder, self.config.shell)

    def _release_shell(self, channel: VercelShellChannel, pid: int) -> None:
        # A shell whose stream is still open is killed with its tree: a wedged one
        # (stopped, say) would not end on EOF. Not when the sandbox goes away next.
        if self._closing or channel.peer_gone:
            return
        with contextlib.suppress(SandboxError, OSError):
            self._helper(scripts.KILL_TREE, ["9", str(pid)])

    # -- helpers -----------------------------------------------------------------

    def _helper(
        self, script: str, args: list[str], stdin: bytes | None = None
    ) -> tuple[int, bytes]:
        if script in _BINARY_SCRIPTS:
            code, hexed = self._helper(_AS_HEX, [script, *args], stdin)
            try:
                return code, bytes.fromhex(hexed.decode("ascii", "replace").replace("\n", " "))
            except ValueError as exc:
                raise SandboxError(f"unreadable helper output from {self.where}") from exc
        started = time.monotonic()
        unanswered = (
            f"a helper command in {self.where} did not answer within {self.helper_deadline:g} s"
        )
        try:
            with self._gone_is_forgotten():
                code, out = self.api.run(self._live(), "sh", ["-c", script, "sbx", *args],
                                         stdin, kill_after=self.helper_deadline)  # fmt: skip
        except TimeoutError:
            raise ServiceUnreachable(f"{unanswered} (nor did the service)") from None
        if code != 0 and time.monotonic() - started >= self.helper_deadline:
            # The service ended it at the deadline: what it printed is not an answer.
            raise ServiceUnreachable(f"{unanswered} (the service ended it)")
        return code, out.encode("utf-8", "surrogateescape")

    @contextlib.contextmanager
    def _gone_is_forgotten(self) -> Iterator[None]:
        """A sandbox destroyed behind sbx's back is one :class:`SandboxDead`, and forgotten:
        the next call creates a new one (and the next command says so) instead of asking
        the destroyed one again and again."""
        try:
            yield
        except SandboxNotFound as exc:
            self._sandbox = None
            raise SandboxDead(
                f"{self.where} is gone (nothing was done); the next call creates a new one"
            ) from exc

    def _kill_group(self, pgid: int, signum: int) -> None:
        scripts.kill_tree(self._helper, self._killed, pgid, signum)

    def read_file(self, path: str, offset: int = 0, limit: int | None = None) -> bytes:
        with self._gone_is_forgotten():
            data = self.api.read(self._live(), path)
        return data[offset:] if limit is None else data[offset : offset + limit]

    def write_file(self, path: str, data: bytes) -> None:
        with self._gone_is_forgotten():
            self.api.write(self._live(), path, data)

    # -- the contract ------------------------------------------------------------

    def _before_exec(self) -> None:
        self._closing = False
        if self._channel is not None and self._channel.peer_gone:
            self.shell.close()  # the sandbox stopped (or the shell died) since the last call
        self.touch()

    def _after_exec(self, result: ShellResult, started: float) -> ExecResult:
        if not self.shell.alive and not result.timed_out and self._sandbox is not None:
            with contextlib.suppress(SandboxError):
                if self.api.find(self.name) is None:
                    self._sandbox = None  # gone: the next call recreates it and says so
        note, self._note = self._note, ""
        restarted = result.shell_restarted or bool(note)
        return result.exec_result(started, note=note, restarted=restarted)

    def touch(self) -> None:
        """Extend the runtime session's time limit when it is about to run out."""
        sandbox, deadline = self._sandbox, self._deadline
        if sandbox is None or deadline is None:
            return
        if deadline - time.time() > self.config.extend_margin:
            return
        try:
            self.api.extend(sandbox, self.config.extend_by)
        except SandboxError as exc:
            log.warning("could not extend %s: %s", self.where, exc)
            return
        self._deadline = self.api.deadline(sandbox) or deadline + self.config.extend_by

    def close(self) -> None:
        """End the shell, then destroy or stop the sandbox as ``on_close`` says. Idempotent."""
        self._closing = self.config.on_close != "keep"
        if self._channel is not None:
            self._channel.abandon = self._closing
        self.shell.close()
        self._channel = None
        sandbox, self._sandbox = self._sandbox, None
        self._runtime_session = self._deadline = None
        if sandbox is None:
            return
        with contextlib.suppress(SandboxError):
            if self.config.on_close == "destroy":
                self.api.destroy(self.name)
            elif self.config.on_close == "stop":
                self.api.stop(sandbox)

    @classmethod
    def reap_orphans(
        cls, config: BackendConfig, max_idle: float, keep: Callable[[str], bool]
    ) -> list[str]:
        return reap_orphans(config_of(VercelConfig, config), max_idle, keep)

    @classmethod
    def availability(cls, config: BackendConfig | None = None) -> tuple[bool, str]:
        try:
            creds = resolve_credentials(config_of(VercelConfig, config))
        except SandboxError as exc:
            return False, str(exc)
        return True, f"credentials for project {creds.project_id} (not checked with the service)"


def reap_orphans(
    config: VercelConfig,
    max_idle: float,
    keep: Callable[[str], bool] = lambda session_id: False,
    *,
    now: float | None = None,
) -> list[str]:
    """Destroy sbx sandboxes (tag ``sbx=1``, name prefix of ``config``) unchanged for more
    than ``max_idle`` seconds whose session ``keep`` does not claim. Returns their names."""
    api = VercelApi(config)
    now = time.time() if now is None else now
    removed: list[str] = []
    for info in api.query(("sbx", "1"), f"{config.name_prefix}-"):
        session = info.tags.get("sbx-session")
        if session is not None and keep(session):
            continue
        if now - info.last_change_ms / 1000 <= max_idle:
            continue
        try:
            api.destroy(info.name)
        except SandboxError as exc:
            log.warning("could not remove orphaned sandbox %s: %s", info.name, exc)
            continue
        removed.append(info.name)
    return removed
