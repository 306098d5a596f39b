"""The ``daytona`` backend: one Daytona sandbox per session, driven through one PTY websocket.

Each session gets a sandbox named after the session (and the settings that
shaped it), labelled ``sbx=1``, ``sbx.session=<id>``, ``sbx.worker=<host:pid>``,
``sbx.config=<fingerprint>``, ``sbx.fleet=<fleet>``, created with no network unless
some was allowed, with auto-stop/archive/delete intervals from the config. The session shell
speaks the framing of :mod:`environments.shell.driver` over a PTY session's websocket
(:mod:`.channel`); killing a timed-out command's process group, background
processes, ``/proc`` reads go through the POSIX helper scripts of
:mod:`environments.shell.helper`, run by the toolbox's ``process.exec``; files
move through the SDK's upload and download.

A restarted worker finds a session's sandbox again by its name (else its
labels). A sandbox found stopped or archived is started again, one found gone
is recreated, and the next command's output says so. :func:`reap_orphans`
deletes idle sbx sandboxes of its own fleet nobody claims.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import secrets
import time
from collections.abc import Callable
from typing import TypeVar

from environments.backends.daytona import sdk
from environments.backends.daytona.channel import PtyChannel, launch_line
from environments.backends.daytona.config import DaytonaConfig
from environments.backends.naming import sandbox_name, worker_label
from environments.base import OUTPUT_ALIGN, ExecResult
from environments.config import BackendConfig, config_of
from environments.errors import BackendUnavailable, SandboxDead, SandboxError, SandboxNotFound
from environments.shell import helper as scripts
from environments.shell.driver import SessionShell
from environments.shell.environment import SandboxShellEnvironment
from environments.shell.framing import shell_quote
from environments.shell.pty_helper import HelperPtyOps
from environments.shell.result import ShellResult

_RESTARTED_NOTE = (
    "[sbx: the session's Daytona sandbox was {state}; it was started again. "
    "Files are kept; processes from before are gone.]\n"
)
T = TypeVar("T")
HELPER_TIMEOUT = 120
# Moves an uploaded file into place: atomic rename in the target's directory, which must exist.
PLACE_FILE = r"""
d=$(dirname -- "$1")
[ -d "$d" ] || { rm -f -- "$2"; exit 44; }
t="$1.sbx-tmp.$$"
{ mv -f -- "$2" "$t" && mv -f -- "$t" "$1"; } 2>/dev/null || { rm -f -- "$2" "$t"; exit 46; }
"""
# Runs a helper whose output is bytes: the toolbox answers text, so it travels as base64.
BINARY = r"""
t=$(mktemp 2>/dev/null) || exit 47
s=$1; shift
sh -c "$s" sbx "$@" > "$t"; rc=$?
base64 < "$t"; rm -f -- "$t"
exit "$rc"
"""


class DaytonaEnvironment(HelperPtyOps, SandboxShellEnvironment):
    """One Daytona sandbox per session; see the module docstring."""

    backend = "daytona"
    config_model = DaytonaConfig
    vanished_note = (
        "[sbx: the session's Daytona sandbox was gone; a new one was created. "
        "Files and processes from before are lost.]\n"
    )

    def __init__(
        self,
        session_id: str,
        config: BackendConfig | None = None,
        client: sdk.Client | None = None,
    ) -> None:
        super().__init__(session_id)
        self.config = config_of(DaytonaConfig, config)
        self._client = client or sdk.client_for(self.config)
        self.name = sandbox_name(session_id, self.config.fingerprint())
        self.where = f"Daytona sandbox {self.name}"
        self._sandbox: sdk.Sandbox | None = None
        self._vanished = False
        self._restarted_note = ""
        self._channel: PtyChannel | None = None
        self._closing = False
        self._killed: dict[int, set[int]] = {}
        self._last_activity = time.monotonic()
        self.shell = SessionShell(self._open, self._kill_group, kill_grace=self.config.kill_grace)

    # -- the sandbox ---------------------------------------------------------------

    @property
    def sandbox_id(self) -> str:
        return self._sandbox.id if self._sandbox is not None else self.name

    def attach(self) -> str:
        # The sandbox's own id, not the name a handle has before it found the sandbox: a
        # worker taking the session over compares it with the id its last worker recorded.
        self._ensure(verify=self._sandbox is None)
        return self.sandbox_id

    @property
    def sandbox(self) -> sdk.Sandbox:
        """The session's sandbox, found, started or created as needed."""
        return self._ensure(verify=self._sandbox is None)

    def _ensure(self, *, verify: bool) -> sdk.Sandbox:
        if self._sandbox is not None and not verify:
            return self._sandbox
        found = self._find()
        replaced = False
        if found is not None:
            state = self._client.state(found, refresh=False)
            if state in sdk.GOING_DOWN:
                self._client.wait_stopped(found)
                state = self._client.state(found)
            if state in sdk.BROKEN:
                self._client.delete(found, wait=True)
                found, replaced = None, True
            elif state in sdk.STARTABLE:
                self._client.start(found)
                self._restarted_note = _RESTARTED_NOTE.format(state=state)
            elif state in sdk.COMING_UP:
                self._client.wait_started(found)
        if found is None:
            found = self._create()
            self._vanished = replaced or self._sandbox is not None
        elif self._sandbox is not None and found.id != self._sandbox.id:
            self._vanished = True
        self._sandbox = found
        return found

    def _find(self) -> sdk.Sandbox | None:
        """The session's sandbox: by its name, else by its labels (a renamed one)."""
        found = self._client.get(self.name)
        if found is not None:
            return found
        labels = {"sbx.session": self.session_id, "sbx.config": self.config.fingerprint()}
        return next(iter(self._client.find(labels)), None)

    def _create(self) -> sdk.Sandbox:
        labels = {
            **self.config.labels,
            "sbx": "1",
            "sbx.session": self.session_id,
            "sbx.worker": worker_label(),
            "sbx.config": self.config.fingerprint(),
            **self.config.fleet_labels(),
        }
        try:
            created = self._client.create(self.config, self.name, labels)
        except sdk.NameTaken:
            # Another worker created it first: use theirs.
            theirs = self._client.get(self.name)
            if theirs is None:
                raise SandboxError(f"cannot create {self.where}: the name is taken") from None
            return theirs
        except BaseException:
            # A sandbox that never became usable must not be left behind.
            with contextlib.suppress(SandboxError):
                leftover = self._client.get(self.name)
                if leftover is not None:
                    self._client.delete(leftover)
            raise
        self._last_activity = time.monotonic()
        return created

    # -- the session shell and helpers ---------------------------------------------

    def _open(self) -> PtyChannel:
        sandbox = self._ensure(verify=True)
        pty_id = f"sbx-{secrets.token_hex(8)}"
        handle = self._client.open_pty(sandbox, pty_id, self.config.workdir)
        channel = PtyChannel(handle)
        try:
            channel.write(launch_line(self.config.shell))
            pid, before = channel.read_pid(self.shell.start_timeout)
        except BaseException:
            channel.close()
            raise
        if pid is None:
            channel.close()
            with contextlib.suppress(SandboxError):
                self._client.kill_pty(sandbox, pty_id)
            raise SandboxDead(f"the shell in {self.where} did not start: {before!r}")
        channel.on_close = lambda: self._end_shell(sandbox, pty_id)
        self._channel = channel
        return channel

    def _end_shell(self, sandbox: sdk.Sandbox, pty_id: str) -> None:
        # Ends the session shell and whatever it still runs; not needed when the
        # whole sandbox goes away next.
        if not self._closing:
            with contextlib.suppress(SandboxError):
                self._client.kill_pty(sandbox, pty_id)

    def _helper(
        self, script: str, args: list[str], stdin: bytes | None = None
    ) -> tuple[int, bytes]:
        """Run ``sh -c SCRIPT sbx ARGS...`` through the toolbox; stdin travels as base64."""
        sandbox = self._ensure(verify=False)
        command = " ".join(shell_quote(a) for a in ["sh", "-c", script, "sbx", *args])
        if stdin is not None:
            encoded = base64.b64encode(stdin).decode()
            command = f"printf %s {encoded} | base64 -d | {command}"
        try:
            code, out = self._client.exec(sandbox, command, HELPER_TIMEOUT)
        except (SandboxNotFound, SandboxDead) as exc:
            raise SandboxDead(f"{self.where} is not running: {exc}") from None
        return code, out.encode("utf-8", "replace")

    def _helper_bytes(self, script: str, args: list[str]) -> tuple[int, bytes]:
        """:meth:`_helper` for a script whose output is binary."""
        code, out = self._helper(BINARY, [script, *args])
        try:
            return code, base64.b64decode(out, validate=False)
        except (binascii.Error, ValueError):
            raise SandboxError(f"unreadable helper output from {self.where}") from None

    def _kill_group(self, pgid: int, signum: int) -> None:
        scripts.kill_tree(self._helper, self._killed, pgid, signum)

    # -- files -----------------------------------------------------------------------

    def _checked_once(self, operation: Callable[[], T]) -> T:
        """``operation`` on the session's sandbox. When it fails in a way that may mean the
        sandbox no longer runs (auto-stopped or archived while idle, deleted behind sbx's
        back), the sandbox is checked -- started, or recreated, as a command would find it;
        the next command says so -- and ``operation`` runs once more. A service that does
        not answer, or refuses the credentials, is raised at once."""
        try:
            return operation()
        except BackendUnavailable:
            raise
        except SandboxError as first:
            try:
                self._ensure(verify=True)
            except SandboxError:
                raise first from None
            return operation()

    def read_file(self, path: str, offset: int = 0, limit: int | None = None) -> bytes:
        data = self._checked_once(lambda: self._client.download(self._ensure(verify=False), path))
        return data[offset:] if limit is None else data[offset : offset + limit]

    def write_file(self, path: str, data: bytes) -> None:
        code = self._checked_once(lambda: self._upload(path, data))
        if code in scripts.FILE_ERRORS:
            raise scripts.FILE_ERRORS[code](f"{path} (in {self.where})")
        if code != 0:
            raise SandboxError(f"writing {path} failed with status {code}")

    def _upload(self, path: str, data: bytes) -> int:
        """Upload ``data`` beside ``path`` and move it into place: the helper's status."""
        staged = f"/tmp/.sbx-upload-{secrets.token_hex(8)}"
        self._client.upload(self._ensure(verify=False), data, staged)
        return self._helper(PLACE_FILE, [path, staged])[0]

    def _read_output_once(
        self, path: str, offset: int, limit: int, cap: int
    ) -> tuple[bytes, int, int]:
        args = [path, str(offset), str(limit), str(cap), str(OUTPUT_ALIGN)]
        code, out = self._checked_once(lambda: self._helper_bytes(scripts.READ_OUTPUT, args))
        if code in scripts.FILE_ERRORS:
            raise scripts.FILE_ERRORS[code](f"{path} (in {self.where})")
        data, sep, trailer = out.rpartition(b"\nsbx-window ")
        fields = trailer.split()
        if code != 0 or not sep or len(fields) != 2 or not all(f.isdigit() for f in fields):
            raise SandboxError(f"reading {path} failed with status {code}")
        return data, int(fields[0]), int(fields[1])

    # -- the contract ----------------------------------------------------------------

    def _shell_stream_gone(self) -> bool:
        return self._channel is not None and self._channel.peer_gone

    def _check_sandbox(self) -> None:
        self._ensure(verify=True)

    def _heartbeat(self) -> None:
        if time.monotonic() - self._last_activity >= self.config.activity_interval:
            with contextlib.suppress(SandboxError):
                self.touch()

    def _after_exec(self, result: ShellResult, started: float) -> ExecResult:
        done = super()._after_exec(result, started)
        if not self._restarted_note:
            return done
        # A sandbox found stopped (auto-stop) and started again: files kept, processes gone.
        note, self._restarted_note = self._restarted_note, ""
        return done.model_copy(update={"output": note + done.output, "shell_restarted": True})

    def touch(self) -> None:
        """Refresh the sandbox's activity clock so Daytona does not auto-stop it (also
        before this object first used it: a restarted worker's leased session)."""
        sandbox = self._sandbox or self._client.get(self.name)
        if sandbox is not None:
            self._last_activity = time.monotonic()
            self._client.refresh_activity(sandbox)

    def close(self) -> None:
        """End the session shell; delete, stop or keep the sandbox as ``on_close`` says."""
        action = self.config.on_close
        self._closing = action != "keep"
        try:
            self.shell.close()
        finally:
            self._channel = None
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is None or action == "keep":
            return
        with contextlib.suppress(SandboxNotFound):
            if action == "delete":
                self._client.delete(sandbox)
            else:
                self._client.stop(sandbox)

    @classmethod
    def reap_orphans(
        cls, config: BackendConfig, max_idle: float, keep: Callable[[str], bool]
    ) -> list[str]:
        return reap_orphans(config_of(DaytonaConfig, config), max_idle, keep)

    @classmethod
    def availability(cls, config: BackendConfig | None = None) -> tuple[bool, str]:
        """Whether the API answers with these credentials (a quick list call)."""
        probe = config_of(DaytonaConfig, config).model_copy(update={"request_timeout": 5.0})
        try:
            sdk.client_for(probe).find({"sbx": "1", "sbx.probe": "1"})
        except SandboxError as exc:
            return False, str(exc)
        return True, f"Daytona API answers ({probe.api_url or 'DAYTONA_API_URL or the default'})"


def reap_orphans(
    config: DaytonaConfig,
    max_idle: float,
    keep: Callable[[str], bool] = lambda session_id: False,
    *,
    now: float | None = None,
    labels: dict[str, str] | None = None,
    client: sdk.Client | None = None,
) -> list[str]:
    """Delete sbx sandboxes of ``config``'s fleet idle for more than ``max_idle`` seconds
    whose session ``keep(session_id)`` does not claim; ``labels`` narrows the sweep (e.g.
    to one worker's sandboxes). ``now`` is wall-clock seconds. Returns the names deleted."""
    client = client or sdk.client_for(config)
    now = time.time() if now is None else now
    removed: list[str] = []
    for sandbox in client.find({"sbx": "1", **config.fleet_labels(), **(labels or {})}):
        session = sandbox.labels.get("sbx.session", "")
        if (session and keep(session)) or now - sdk.last_activity(sandbox) <= max_idle:
            continue
        with contextlib.suppress(SandboxError):
            client.delete(sandbox)
            removed.append(sandbox.name)
    return removed
