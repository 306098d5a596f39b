"""The ``apptainer`` (and ``singularity``) backend: one instance per session.

A session's sandbox is an apptainer *instance* started with
``--containall --no-home --writable-tmpfs --no-privs`` and, by default, no network
(``--net --network none``); every ``exec`` into it says ``--cleanenv --no-privs``, so
nothing of the worker's environment reaches the sandbox and root there holds no
capabilities. The image is a ``.sif`` file, a
sandbox directory or a ``docker://`` reference (apptainer builds it on first use). The session
shell is ``apptainer exec instance://NAME sh -s`` over pipes; the instance
has its own pid namespace, so killing a timed-out command's tree, probing
background processes and moving files all run inside the instance through
short ``apptainer exec`` helpers (:mod:`environments.shell.helper`).
``close`` stops the instance.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
from typing import Literal

from environments.backends.local.channel import PipeChannel
from environments.base import ExecResult
from environments.config import BackendConfig, config_of
from environments.errors import BackendUnavailable, SandboxDead, SandboxError
from environments.sanitize import client_environment
from environments.shell import helper as scripts
from environments.shell.driver import SessionShell
from environments.shell.environment import ShellEnvironment
from environments.shell.result import ShellResult

_SHELLS = {"sh": ["sh", "-s"], "bash": ["bash", "--noprofile", "--norc", "-s"]}


class ApptainerConfig(BackendConfig):
    """Settings of the apptainer backend (``SBX_APPTAINER_*``; ``singularity`` is an alias)."""

    type: Literal["apptainer"] = "apptainer"
    image: str | None = None
    """``.sif`` file, sandbox directory or ``docker://`` reference."""
    binary: str | None = None
    """Executable to run; ``apptainer``, else ``singularity``, from PATH when unset."""
    network: Literal["none", "host"] = "none"
    workdir: str = "/tmp"
    """Starting directory of a session inside the instance."""
    extra_args: tuple[str, ...] = ()
    """More ``instance start`` options (binds, ``--fakeroot``, ...)."""
    shell: Literal["sh", "bash"] = "sh"
    kill_grace: float = 2.0
    start_timeout: float = 600.0
    """Seconds ``instance start`` may take (a ``docker://`` image is built on first use)."""

    def executable(self) -> str:
        for name in filter(None, (self.binary, "apptainer", "singularity")):
            path = shutil.which(name)
            if path:
                return path
        raise BackendUnavailable("neither apptainer nor singularity is on PATH")


def instance_name(session_id: str) -> str:
    """Instance name for a session: a restarted worker finds the same instance."""
    slug = re.sub(r"[^a-zA-Z0-9_-]", "-", session_id)[:32].strip("-") or "s"
    return f"sbx-{slug}-{hashlib.sha256(session_id.encode()).hexdigest()[:10]}"


class ApptainerEnvironment(scripts.HelperOps, ShellEnvironment):
    """One apptainer instance per session; see the module docstring."""

    backend = "apptainer"
    config_model = ApptainerConfig

    def __init__(self, session_id: str, config: BackendConfig | None = None) -> None:
        super().__init__(session_id)
        self.config = config_of(ApptainerConfig, config)
        if not self.config.image:
            raise BackendUnavailable("no image configured (set SBX_APPTAINER_IMAGE)")
        self._binary = self.config.executable()
        self.name = instance_name(session_id)
        self.where = f"instance {self.name}"
        # The client process gets the worker's environment minus its secrets; none of
        # it reaches the instance (--containall at its start, --cleanenv on each exec).
        self._client_env = client_environment(os.environ)
        self._started = False
        self._killed: dict[int, set[int]] = {}
        self.shell = SessionShell(self._open, self._kill_group, kill_grace=self.config.kill_grace)

    @property
    def sandbox_id(self) -> str:
        return f"apptainer:{self.name}"

    # -- the instance ----------------------------------------------------------------

    def start_command(self) -> list[str]:
        """The ``instance start`` command line for this session."""
        argv = [self._binary, "instance", "start", "--containall", "--no-home", "--writable-tmpfs",
                "--no-privs"]  # fmt: skip
        if self.config.network == "none":
            argv += ["--net", "--network", "none"]
        return [*argv, *self.config.extra_args, str(self.config.image), self.name]

    def _ensure_instance(self) -> None:
        if self._started:
            return
        done = subprocess.run(
            self.start_command(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=self._client_env,
            timeout=self.config.start_timeout,
            check=False,
        )
        err = done.stderr.decode(errors="replace")
        if done.returncode != 0 and "already exists" not in err:
            # A half-started instance must not linger.
            self._stop()
            raise SandboxError(f"apptainer instance start failed: {err.strip()[-2000:]}")
        self._started = True

    def _exec_argv(self, command: list[str], pwd: str | None = None) -> list[str]:
        """``apptainer exec`` of ``command`` in the instance, with a clean environment.

        An exec passes its caller's environment (the worker's, less its credentials) into
        the container unless it says ``--cleanenv`` itself: the instance's
        ``--containall`` does not carry over to later execs. ``--no-privs``: root in the
        container holds no capabilities (a worker running as root would give them all)."""
        argv = [self._binary, "exec", "--cleanenv", "--no-privs"]
        if pwd:
            argv += ["--pwd", pwd]
        return [*argv, f"instance://{self.name}", *command]

    def _open(self) -> PipeChannel:
        self._ensure_instance()
        argv = self._exec_argv(_SHELLS[self.config.shell], pwd=self.config.workdir)
        return PipeChannel(argv, self._client_env, "/")

    def _helper(
        self, script: str, args: list[str], stdin: bytes | None = None
    ) -> tuple[int, bytes]:
        self._ensure_instance()
        try:
            done = subprocess.run(
                self._exec_argv(["sh", "-c", script, "sbx", *args]),
                input=stdin if stdin is not None else b"",
                capture_output=True,
                env=self._client_env,
                timeout=120,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxDead(f"apptainer exec in {self.name} failed: {exc}") from exc
        if done.returncode == 255 and b"FATAL" in done.stderr:
            self._started = False  # the instance is gone; the next call restarts it
            raise SandboxDead(f"{self.name}: {done.stderr.decode(errors='replace').strip()}")
        return done.returncode, done.stdout

    def _kill_group(self, pgid: int, signum: int) -> None:
        scripts.kill_tree(self._helper, self._killed, pgid, signum)

    def _stop(self) -> None:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                [self._binary, "instance", "stop", self.name],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env=self._client_env,
                timeout=60,
                check=False,
            )

    # -- the contract ------------------------------------------------------------

    def _after_exec(self, result: ShellResult, started: float) -> ExecResult:
        if not self.shell.alive and not result.timed_out:
            self._started = False  # maybe the instance died: the next start checks
        return result.exec_result(started)

    def close(self) -> None:
        """End the session shell and stop the instance. Idempotent."""
        self.shell.close()
        if self._started:
            self._stop()
            self._started = False

    @classmethod
    def availability(cls, config: BackendConfig | None = None) -> tuple[bool, str]:
        try:
            config = config_of(ApptainerConfig, config)
            binary = config.executable()
        except (BackendUnavailable, ValueError) as exc:
            return False, str(exc)
        if not config.image:
            return False, "no image configured (set SBX_APPTAINER_IMAGE)"
        return True, f"{binary} with {config.image}"
