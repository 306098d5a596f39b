"""The ``ssh`` backend: a session shell on a remote host over one SSH channel (asyncssh).

Host keys are always verified against ``known_hosts`` (``SBX_SSH_KNOWN_HOSTS``):
an unknown or changed key is a :class:`HostKeyNotVerified` error, never
accepted silently. Authentication uses ``key_file`` and/or the SSH agent.
Connections are reused across sessions with a cap on channels per connection
(:mod:`environments.backends.ssh.channel`), with keepalives so a dead peer is noticed.

Each session holds one channel running ``sh -s`` driven by
:class:`~environments.shell.driver.SessionShell`. A timeout kills the command's
process tree on the remote host over a second channel. When the connection
drops, the next call reconnects and the session's cwd and exported variables
are replayed into the new shell (``ExecResult.shell_restarted`` says so).
"""

from __future__ import annotations

import contextlib
import getpass
import os
from typing import Any, Literal

import asyncssh
from pydantic import Field

from environments.backends.ssh.channel import (
    LOOP,
    POOL,
    ConnectionKey,
    PooledConnection,
    SSHProcessChannel,
)
from environments.base import ShellIdentity
from environments.config import BackendConfig, config_of
from environments.errors import (
    BackendUnavailable,
    SandboxDead,
    SandboxError,
    ServiceUnreachable,
)
from environments.shell import helper as scripts
from environments.shell.driver import SessionShell
from environments.shell.environment import ShellEnvironment
from environments.shell.framing import shell_quote
from environments.shell.pty_helper import HelperPtyOps
from environments.shell.script import start_script, started_shell_pid


class HostKeyNotVerified(SandboxError, ConnectionError):
    """The server's host key is not in known_hosts, or differs from the one there."""


class SSHConfig(BackendConfig):
    """Settings of the ssh backend (``SBX_SSH_*``)."""

    type: Literal["ssh"] = "ssh"
    host: str | None = None
    port: int = 22
    user: str = Field(default_factory=getpass.getuser)
    key_file: str | None = None
    """Private key for authentication; the default keys of ``~/.ssh`` when unset."""
    known_hosts: str = "~/.ssh/known_hosts"
    """Trusted host keys. Verification cannot be turned off."""
    use_agent: bool = True
    keepalive_interval: float = 15.0
    keepalive_count_max: int = 3
    connect_timeout: float = 15.0
    max_channels_per_connection: int = 8
    """Below the server's ``MaxSessions`` (OpenSSH: 10); helpers need a channel too."""
    cwd: str | None = None
    """Starting directory of a new session; the remote login directory when unset."""
    shell: Literal["auto", "sh", "bash"] = "auto"
    kill_grace: float = 2.0

    def key(self) -> ConnectionKey:
        if not self.host:
            raise BackendUnavailable("no SSH host configured (set SBX_SSH_HOST)")
        return ConnectionKey(
            host=self.host,
            port=self.port,
            user=self.user,
            key_file=os.path.expanduser(self.key_file) if self.key_file else None,
            known_hosts=os.path.expanduser(self.known_hosts),
            use_agent=self.use_agent,
        )


async def _connect(config: SSHConfig, key: ConnectionKey) -> asyncssh.SSHClientConnection:
    options: dict[str, Any] = {
        "username": key.user,
        "known_hosts": key.known_hosts,
        "keepalive_interval": config.keepalive_interval,
        "keepalive_count_max": config.keepalive_count_max,
        "connect_timeout": config.connect_timeout,
        "config": None,  # ~/.ssh/config must not weaken what sbx was told
    }
    if key.key_file:
        options["client_keys"] = [key.key_file]
    if not key.use_agent:
        options["agent_path"] = None
    try:
        return await asyncssh.connect(key.host, key.port, **options)
    except asyncssh.HostKeyNotVerifiable as exc:
        raise HostKeyNotVerified(
            f"host key of {key.host}:{key.port} not verified against {key.known_hosts}: "
            f"{exc.reason}; add the correct key there (ssh-keyscan, then check it)"
        ) from exc
    except asyncssh.PermissionDenied as exc:
        raise SandboxError(f"ssh authentication as {key.user} failed: {exc.reason}") from exc
    except (OSError, asyncssh.Error) as exc:
        raise SandboxDead(f"cannot connect to {key.host}:{key.port}: {exc}") from exc


class SSHEnvironment(HelperPtyOps, ShellEnvironment):
    """One session shell on a remote host; see the module docstring."""

    backend = "ssh"
    config_model = SSHConfig
    dead_means_ended = False  # a lost connection is not an ended host: ask again later

    def __init__(self, session_id: str, config: BackendConfig | None = None) -> None:
        super().__init__(session_id)
        self.config = config_of(SSHConfig, config)
        self._key = self.config.key()
        if not os.path.exists(self._key.known_hosts):
            raise BackendUnavailable(
                f"known_hosts file {self._key.known_hosts} missing: host keys are always "
                "verified (set SBX_SSH_KNOWN_HOSTS)"
            )
        self.where = f"{self._key.user}@{self._key.host}:{self._key.port}"
        self._channel: SSHProcessChannel | None = None
        self._shell_pid = 0
        self._closing = False
        self._stranded: ShellIdentity | None = None  # a shell whose connection dropped
        self._killed: dict[int, set[int]] = {}
        self.shell = SessionShell(self._open, self._kill_group, kill_grace=self.config.kill_grace)

    @property
    def sandbox_id(self) -> str:
        return f"ssh:{self.where}"

    # -- channels ----------------------------------------------------------------

    def _acquire(self) -> PooledConnection:
        timeout = self.config.connect_timeout + 5
        return POOL.acquire(
            self._key,
            self.config.max_channels_per_connection,
            _connect(self.config, self._key),
            timeout,
        )

    def _start_process(
        self, command: str
    ) -> tuple[PooledConnection, asyncssh.SSHClientProcess[bytes]]:
        """A new channel running ``command`` on a pooled connection (holding one slot).

        A cached connection that turns out to be dead is dropped and the channel
        opened once more on a fresh one."""
        for attempt in (1, 2):
            pooled = self._acquire()

            async def start(conn: asyncssh.SSHClientConnection) -> Any:
                return await conn.create_process(command, encoding=None, stderr=asyncssh.DEVNULL)

            try:
                return pooled, LOOP.run(start(pooled.conn), self.config.connect_timeout + 5)
            except (OSError, asyncssh.Error, TimeoutError) as exc:
                POOL.release(pooled)
                if attempt == 1 and not pooled.usable:
                    continue  # the connection dropped since it was cached: reconnect
                raise SandboxDead(f"cannot open a channel on {self.where}: {exc!r}") from exc
        raise AssertionError("unreachable")

    def _open(self) -> SSHProcessChannel:
        inner = start_script(self.config.shell)
        if self.config.cwd:
            inner = f"cd -- {shell_quote(self.config.cwd)} || exit 1; {inner}"
        pooled, process = self._start_process(f"exec /bin/sh -c {shell_quote(inner)}")
        channel = SSHProcessChannel(process)
        try:
            pid = started_shell_pid(channel, self.shell.start_timeout, self.where)
        except SandboxDead:
            POOL.release(pooled)
            raise
        self._shell_pid = pid
        channel.on_close = lambda: self._release_shell(channel, pooled, pid)
        self._channel = channel
        self._end_stranded()
        return channel

    def _end_stranded(self) -> None:
        # A dropped connection ends no process on the host: the old shell still waits for
        # the command it ran (an endless loop runs on forever). Once the host answers
        # again, that shell is killed with its tree -- only if its pid is still that
        # process (its start time matches), never a reused pid.
        stranded, self._stranded = self._stranded, None
        if stranded is not None:
            with contextlib.suppress(SandboxError, OSError, TimeoutError):
                self.end_stale_shell(stranded)

    def _release_shell(
        self, channel: SSHProcessChannel, pooled: PooledConnection, pid: int
    ) -> None:
        # A shell whose stream is still open is killed with its tree: a wedged one
        # (stopped, say) would not end when its stdin closes.
        try:
            if not self._closing and not channel.peer_gone:
                with contextlib.suppress(SandboxError, OSError, TimeoutError):
                    self._helper(scripts.KILL_TREE, ["9", str(pid)])
            elif not self._closing and self.shell.shell_pid == pid and self.shell.shell_start:
                # Its stream ended: it exited, or its connection dropped and it runs on.
                # The next shell ends it if it runs on (see _end_stranded).
                self._stranded = ShellIdentity(pid=pid, start_time=self.shell.shell_start)
        finally:
            POOL.release(pooled)

    def _helper(
        self, script: str, args: list[str], stdin: bytes | None = None
    ) -> tuple[int, bytes]:
        """Run ``sh -c SCRIPT sbx ARGS...`` on the host; ``(exit status, stdout)``.

        Raises :class:`~environments.errors.ServiceUnreachable`, never ``SandboxDead``,
        when the host cannot be reached: the host outlives its connections, so what
        runs there (a background process) may still run; only the helper's own answer
        says a process is gone."""
        command = " ".join(shell_quote(a) for a in ["sh", "-c", script, "sbx", *args])
        try:
            pooled, process = self._start_process(command)
        except SandboxDead as exc:
            raise ServiceUnreachable(str(exc)) from exc

        async def talk() -> tuple[int | None, bytes]:
            try:
                if stdin:
                    process.stdin.write(stdin)
                process.stdin.write_eof()  # EOF also for empty input: `cat` must end
                out = await process.stdout.read()
                await process.wait_closed()
            finally:
                process.close()
            return process.exit_status, out

        try:
            status, stdout = LOOP.run(talk(), self.helper_deadline)
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            raise ServiceUnreachable(f"helper command on {self.where} failed: {exc!r}") from exc
        finally:
            POOL.release(pooled)
        code = status if status is not None else -1
        return code, stdout

    def _kill_group(self, pgid: int, signum: int) -> None:
        scripts.kill_tree(self._helper, self._killed, pgid, signum)

    # -- the contract ------------------------------------------------------------

    def _before_exec(self) -> None:
        if self._channel is not None and self._channel.peer_gone:
            self.shell.close()  # the connection dropped since the last call: reconnect

    def close(self) -> None:
        """End the session shell (processes it started with ``spawn`` keep running)."""
        self._closing = True
        try:
            self.shell.close()
        finally:
            self._closing = False
        self._channel = None

    @classmethod
    def availability(cls, config: BackendConfig | None = None) -> tuple[bool, str]:
        try:
            key = config_of(SSHConfig, config).key()
        except (BackendUnavailable, ValueError) as exc:
            return False, str(exc)
        if not os.path.exists(key.known_hosts):
            return False, f"known_hosts file {key.known_hosts} missing (set SBX_SSH_KNOWN_HOSTS)"
        return True, f"configured for {key.user}@{key.host}:{key.port}"


def close_connections() -> None:
    """Close every cached SSH connection of this process (worker shutdown, tests)."""
    POOL.close_all()
