"""The ``local`` backend: session shells on the worker's own machine, each in a jail.

With ``isolation: bwrap`` (the default) every session shell and background
process runs in a bubblewrap jail (:mod:`environments.backends.local.jail`):
the worker's ``SBX_HOME``, spool, sockets and ``/proc`` entries do not exist
there. Paths given to this backend are paths *in the jail*; the worker reaches
them through :class:`~environments.backends.local.jailfs.JailFiles`, never
following a link the sandbox planted. Pids are the host's. Where no jail can be
made the backend refuses to start (:class:`BackendUnavailable`); with
``isolation: none`` commands run as the worker's own user: trusted code only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil

from environments.backends.local import pty
from environments.backends.local.channel import PipeChannel
from environments.backends.local.config import NO_ISOLATION, LocalConfig
from environments.backends.local.files import LocalFiles
from environments.backends.local.jail import SHELL_INIT, Jail, probe
from environments.backends.local.jailfs import JailFiles
from environments.backends.local.launch import LAUNCH_ENV
from environments.backends.local.sessiondirs import reap_sessions
from environments.backends.local.spawn import PLAIN_WRAPPER, jailed_wrapper, start_jailed
from environments.backends.local.tree import group_of, host_pgid, kill_tree, running
from environments.base import HeadTrim, ShellIdentity, SpawnedProcess
from environments.config import BackendConfig, config_of
from environments.errors import BackendUnavailable, SandboxDead, WorkdirNotFound
from environments.procinfo import boot_id, process_start_time
from environments.sanitize import sandbox_environment
from environments.shell.driver import SessionShell
from environments.shell.environment import ShellEnvironment
from environments.shell.framing import shell_quote

__all__ = ["LocalConfig", "LocalEnvironment"]


class LocalEnvironment(ShellEnvironment):
    """Runs the session shell as a child process of the worker, jailed unless configured off."""

    backend = "local"
    config_model = LocalConfig
    supports_pty = True
    processes_on_worker_host = True
    can_punch_holes = True

    def __init__(self, session_id: str, config: BackendConfig | None = None) -> None:
        """Raises :class:`BackendUnavailable` when no shell is found, or when no jail can
        be made here and isolation is not ``none`` (nothing runs unjailed by accident)."""
        super().__init__(session_id)
        self.config = config_of(LocalConfig, config)
        shell = shutil.which(self.config.shell) or shutil.which("sh")
        if shell is None:
            raise BackendUnavailable("no POSIX shell found on PATH")
        self._argv = (
            [shell, "--noprofile", "--norc", "-s"] if shell.endswith("bash") else [shell, "-s"]
        )
        self._cwd = self.config.cwd or os.getcwd()
        self._env = sandbox_environment(os.environ, self.config.forward_env)
        self.jail: Jail | None = None
        jail_files: JailFiles | None = None
        if self.config.isolation == "bwrap":
            ok, why = probe(self.config)
            if not ok:
                raise BackendUnavailable(
                    f"{why}; the local backend runs nothing without its jail unless the "
                    f"operator sets SBX_LOCAL_ISOLATION=none ({NO_ISOLATION})"
                )
            self.jail = self._make_jail(session_id)
            jail_files = JailFiles(self.jail.mounts)
            self._cwd = self.jail.workspace
            self._env = self.jail.environment(self._env)
        self.files = LocalFiles(jail_files)
        self._killed: dict[int, set[int]] = {}
        self._groups: dict[int, int] = {}
        """Process groups of the running command: the jail's number -> the host's."""
        self._channel: PipeChannel | None = None
        self._jail_identity: tuple[PipeChannel, ShellIdentity] | None = None
        self.shell = SessionShell(self._open, self._kill_group, kill_grace=self.config.kill_grace)

    def _make_jail(self, session_id: str) -> Jail:
        """The session's jail. Without a configured workspace, a worker's cwd that may not
        be one (``/``, its ``SBX_HOME``, its home: where services start) is left out and
        the session starts in its own home; a configured one that may not is an error."""
        home = self._env.get("HOME", "")
        try:
            return Jail(self.config, session_id, self._cwd, home)
        except BackendUnavailable:
            if self.config.cwd is not None:
                raise
            return Jail(self.config, session_id, None, home)

    # -- the session shell ---------------------------------------------------------------

    def _open(self) -> PipeChannel:
        if self.jail is None:
            self._channel = PipeChannel(self._argv, self._env, self._cwd)
        else:
            self._channel = self._open_jailed()
        return self._channel

    def _open_jailed(self) -> PipeChannel:
        """The session shell in a new jail, under :data:`SHELL_INIT`; its pipes go to the
        shell alone, over a socket."""
        assert self.jail is not None
        to_shell_r, to_shell = os.pipe2(os.O_CLOEXEC)
        from_shell, from_shell_w = os.pipe2(os.O_CLOEXEC)
        ours, theirs = socket.socketpair()
        lock = self.jail.dirs.hold()
        # What bubblewrap says when it cannot make the jail (the shell's stderr is closed).
        log = os.open(self.jail.dirs.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                      0o600)  # fmt: skip
        try:
            init = [os.path.realpath(sys.executable), "-I", "-S", "-c", SHELL_INIT,
                    str(theirs.fileno())]  # fmt: skip
            with self.jail.command(cwd=self._cwd, env=self._env, lock_fd=lock) as (
                argv,
                args_fd,
            ):
                proc = subprocess.Popen(
                    argv + init + self._argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    env=LAUNCH_ENV,
                    cwd="/",
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(lock, args_fd, theirs.fileno()),
                )
            try:
                socket.send_fds(ours, [b"."], [to_shell_r, from_shell_w])
            except OSError as exc:  # the jail ended before its init took the pipes
                proc.wait(timeout=30)
                why = self.jail.dirs.jail_log() or str(exc)
                raise SandboxDead(f"the session shell could not start: {why}") from None
        except BaseException:
            os.close(to_shell)
            os.close(from_shell)
            raise
        finally:
            for fd in (lock, log, to_shell_r, from_shell_w):
                os.close(fd)
            ours.close()
            theirs.close()
        return PipeChannel.over(proc, to_shell, from_shell, explain=self.jail.dirs.jail_log)

    def _before_exec(self) -> None:
        self._groups.clear()

    def _kill_group(self, pgid: int, signum: int) -> None:
        if self.jail is not None:
            # The shell reports the jail's numbers; signals go to the host's.
            host = self._groups.get(pgid)
            if host is None:
                root = self._channel.proc.pid if self._channel else None
                host = host_pgid(root, pgid) if root else None
                if host is None:
                    if signum == 0:
                        raise ProcessLookupError(f"nothing left of process group {pgid}")
                    return
                self._groups[pgid] = host
            pgid = host
        kill_tree(pgid, signum, self._killed)

    @property
    def sandbox_id(self) -> str:
        pid = self._channel.proc.pid if self._channel else 0
        return f"local:{os.uname().nodename}:{pid}"

    def _session_state(self) -> tuple[dict[str, str], str]:
        if not self.shell.alive and not self.shell.cwd:
            self.shell.start()
        return dict(self.shell.env), self.shell.cwd

    def _is_dir(self, path: str) -> bool:
        if self.jail is None:
            return Path(path).is_dir()
        check = self.shell.run(f"[ -d {shell_quote(path)} ]", timeout=30, output_limit=1024)
        return check.exit_code == 0

    # -- background processes ------------------------------------------------------------

    def process_paths(self, process_id: str, spool: str) -> tuple[str, str]:
        if self.jail is None:
            return super().process_paths(process_id, spool)
        base = f"{self.jail.dirs.proc}/{process_id}"
        return base + ".out", base + ".status"

    def spawn_context(
        self, workdir: str | None, env: dict[str, str] | None
    ) -> tuple[dict[str, str], str]:
        """``(environment, cwd)`` a background process starts with: the session's unless
        overridden. Raises :class:`WorkdirNotFound` (nothing is run) for a missing workdir."""
        session_env, session_cwd = self._session_state()
        cwd = workdir or session_cwd
        if not self._is_dir(cwd):
            raise WorkdirNotFound(f"workdir does not exist: {cwd} (nothing was run)")
        return {**session_env, **(env or {})}, cwd

    def spawn(
        self,
        command: str,
        *,
        output_path: str,
        status_path: str,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
    ) -> SpawnedProcess:
        run_env, cwd = self.spawn_context(workdir, env)
        # The wrapper outlives the worker and records the status where a later worker
        # finds it; the command runs in a subshell (a fork, no exec).
        out = self.files.open(output_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.fchmod(out, 0o600)
            if self.jail is None:
                proc = subprocess.Popen(
                    ["sh", "-c", PLAIN_WRAPPER, "sbx-process", command, status_path],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=cwd,
                    env=run_env,
                    start_new_session=True,
                    close_fds=True,
                )
                pid = proc.pid
            else:
                pid = start_jailed(
                    self.jail,
                    lambda ready, lock: ["/bin/sh", "-c", jailed_wrapper(ready),
                                         "sbx-process", command, status_path],
                    cwd=cwd, env=run_env, stdout=out,
                )  # fmt: skip
        finally:
            os.close(out)
        return SpawnedProcess(
            pid=pid,
            pgid=pid,
            start_time=process_start_time(pid),
            output_path=output_path,
            status_path=status_path,
        )

    def spawn_on_pty(
        self,
        command: str,
        *,
        output_path: str,
        status_path: str,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
    ) -> SpawnedProcess:
        run_env, cwd = self.spawn_context(workdir, env)
        run_env.setdefault("TERM", "xterm")
        self.files.unlink(pty.input_path_for(output_path))
        # The output file exists (0600) before the relay starts: readers never see it missing.
        os.close(self.files.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND))
        if self.jail is None:
            pid = pty.start_relay(
                lambda ready: pty.relay_command(
                    sys.executable, command, output_path, status_path, ready
                ),
                cwd=cwd,
                env=run_env,
            )
        else:
            python = os.path.realpath(sys.executable)  # a venv's link may not be in the jail
            pid = start_jailed(
                self.jail,
                lambda ready, _lock: pty.relay_command(
                    python, command, output_path, status_path, ready
                ),
                cwd=cwd,
                env=run_env,
                stdout=None,
            )
        return SpawnedProcess(
            pid=pid,
            pgid=pid,
            start_time=process_start_time(pid),
            output_path=output_path,
            status_path=status_path,
        )

    def write_input(self, process: SpawnedProcess, data: bytes) -> int:
        if self.files.jail is None:
            return pty.write_input(process.output_path, data)
        return pty.write_input(process.output_path, data, self.files.jail.open)

    def boot_id(self) -> str | None:
        return boot_id()

    def shell_identity(self) -> ShellIdentity | None:
        """In a jail: the jail's bubblewrap process, by the host's numbers (the shell's own
        pid is the jail's, meaningless to another worker); ending it ends the jail."""
        if self.jail is None:
            return super().shell_identity()
        if self._channel is None or not self.shell.alive:
            return None
        pid = self._channel.proc.pid
        # Asked after every call: the jail process's start time is read once per channel.
        if self._jail_identity is None or self._jail_identity[0] is not self._channel:
            identity = ShellIdentity(pid=pid, start_time=process_start_time(pid))
            self._jail_identity = (self._channel, identity)
        return self._jail_identity[1]

    def end_stale_shell(self, shell: ShellIdentity) -> bool:
        mine = self.shell_identity()
        if mine is not None and mine.pid == shell.pid:
            return False
        start = process_start_time(shell.pid)
        if start is None or (shell.start_time is not None and start != shell.start_time):
            return False  # gone, or the pid is another process now: never signal it
        kill_tree(shell.pid, signal.SIGKILL, {})
        return True

    def is_running(self, process: SpawnedProcess) -> bool:
        start = process_start_time(process.pid)
        if start is None or (process.start_time is not None and start != process.start_time):
            return False
        with contextlib.suppress(psutil.Error):
            return bool(psutil.Process(process.pid).status() != psutil.STATUS_ZOMBIE)
        return False

    def signal(self, process: SpawnedProcess, signum: int) -> bool:
        leader_start = process_start_time(process.pgid)
        if (
            leader_start is not None
            and process.start_time is not None
            and leader_start != process.start_time
            and running(process.pgid)
        ):
            return False  # the pid is another process now: never signal it
        # With the leader gone, the group id can only still be held by our members.
        members = [p for p in psutil.process_iter() if group_of(p.pid) == process.pgid]
        if not any(running(p.pid) for p in members):
            return False
        try:
            os.killpg(process.pgid, signum)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    # -- file contract -------------------------------------------------------------------

    def read_file(self, path: str, offset: int = 0, limit: int | None = None) -> bytes:
        return self.files.read(path, offset, limit)

    def trim_output_head(self, path: str, cap: int, *, probe: bool = False) -> HeadTrim:
        return self.files.trim_head(path, cap, probe=probe)

    def _read_output_once(
        self, path: str, offset: int, limit: int, cap: int
    ) -> tuple[bytes, int, int]:
        return self.files.read_window(path, offset, limit, cap)

    def write_file(self, path: str, data: bytes) -> None:
        self.files.write(path, data)

    # -- lifecycle -----------------------------------------------------------------------

    def touch(self) -> None:
        if self.jail is not None:
            self.jail.dirs.touch()

    def close(self) -> None:
        """End the session shell; a jail's directories go unless a process of it runs."""
        self.shell.close()
        if self.jail is not None:
            self.jail.dirs.remove_if_unused()

    @classmethod
    def availability(cls, config: BackendConfig | None = None) -> tuple[bool, str]:
        if not (shutil.which("bash") or shutil.which("sh")):
            return False, "no POSIX shell on PATH"
        cfg = config_of(LocalConfig, config)
        if cfg.isolation == "none":
            return True, f"ok ({NO_ISOLATION})"
        return probe(cfg)

    @classmethod
    def reap_orphans(
        cls, config: BackendConfig, max_idle: float, keep: Callable[[str], bool]
    ) -> list[str]:
        cfg = config_of(LocalConfig, config)
        if cfg.isolation == "none" or cfg.state_dir is None:
            return []
        return reap_sessions(Path(cfg.state_dir), max_idle, keep)
