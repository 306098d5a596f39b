"""The ``docker`` backend: one hardened container per session, driven through one attached exec.

Each session gets a container named after the session (and the settings that
shaped it), labelled ``sbx=1``, ``sbx.session=<id>``, ``sbx.worker=<host:pid>``,
``sbx.fleet=<fleet>``.
The session shell is a single ``docker exec -i sh -s`` whose hijacked socket
carries the framing of :mod:`environments.shell.driver` (0.1-0.2 ms per call instead
of ~80-100 ms for an exec per call). Everything else -- killing a timed-out
command's process tree, background processes, files -- goes through short
helper execs running the POSIX scripts of :mod:`environments.shell.helper`,
so images with only busybox ``sh`` work.

A restarted worker finds a session's container again by its name (the name is
derived from the session id), starting it if it was stopped; a container that
vanished is recreated and the call's output says so. Containers left behind by
dead workers are removed by
:func:`~environments.backends.docker.orphans.reap_orphans`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import docker
from docker.errors import APIError, ImageNotFound, NotFound

from environments.backends.docker.channel import DockerExecChannel
from environments.backends.docker.config import DockerConfig, container_name, docker_client
from environments.backends.docker.orphans import reap_orphans
from environments.backends.naming import worker_label
from environments.config import BackendConfig, config_of
from environments.errors import (
    BackendUnavailable,
    SandboxDead,
    SandboxError,
    ServiceUnreachable,
)
from environments.shell import helper as scripts
from environments.shell.driver import SessionShell
from environments.shell.environment import SandboxShellEnvironment
from environments.shell.pty_helper import HelperPtyOps
from environments.shell.script import start_script, started_shell_pid

# The container's main process only keeps it alive; docker-init (init=True) reaps orphans.
_KEEPALIVE = ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600; done"]


class DockerEnvironment(HelperPtyOps, SandboxShellEnvironment):
    """One container per session; see the module docstring."""

    backend = "docker"
    config_model = DockerConfig
    vanished_note = (
        "[sbx: the session's container was gone; a new one was created. "
        "Files and processes from before are lost.]\n"
    )

    def __init__(
        self,
        session_id: str,
        config: BackendConfig | None = None,
        client: docker.DockerClient | None = None,
    ) -> None:
        super().__init__(session_id)
        self.config = config_of(DockerConfig, config)
        self._api: Any = (client or docker_client(self.config.base_url)).api
        self.name = container_name(session_id, self.config)
        self.where = f"container {self.name}"
        self._cid: str | None = None
        self._vanished = False
        self._restarted = False  # a stopped container was started again: say so once
        self._closing = False
        self._channel: DockerExecChannel | None = None
        self._killed: dict[int, set[int]] = {}
        self._last_heartbeat = time.monotonic()
        self.shell = SessionShell(self._open, self._kill_group, kill_grace=self.config.kill_grace)

    # -- the container ---------------------------------------------------------

    @property
    def sandbox_id(self) -> str:
        return self._cid or self.name

    @property
    def container_id(self) -> str:
        """Id of the session's container, creating or starting it if needed."""
        return self._container(verify=self._cid is None)

    def attach(self) -> str:
        """The running container's id, checked now (one inspect): a container stopped or
        removed since the last call is started again or recreated, and the next command's
        result says so. Calls that act in the sandbox without the session shell (files,
        background processes) attach first."""
        return self._container(verify=True)

    def _container(self, *, verify: bool) -> str:
        if self._cid is not None and not verify:
            return self._cid
        info = self._find()
        if info is None:
            cid = self._create()
        else:
            cid = info["Id"]
            if not info["State"]["Running"]:
                try:
                    self._api.start(cid)
                except APIError as exc:
                    raise SandboxDead(f"container {self.name} does not start: {exc}") from exc
                # Its processes did not survive the stop, nor did its tmpfs mounts' files.
                self._restarted = True
        if self._cid is not None and cid != self._cid:
            self._vanished = True
        self._cid = cid
        return cid

    def _take_sandbox_note(self) -> str:
        note = super()._take_sandbox_note()
        restarted, self._restarted = self._restarted, False
        if note or not restarted:
            return note  # a new container: the vanished note says all
        lost = ", ".join(sorted(self.config.tmpfs))
        files = f"and so are the files under {lost} (in memory)" if lost else "its files stay"
        return (
            "[sbx: the session's container had stopped and was started again; "
            f"processes from before are gone, {files}.]\n"
        )

    def _find(self) -> dict[str, Any] | None:
        """The session's container: by its name, else by its labels (a renamed one)."""
        try:
            return dict(self._api.inspect_container(self.name))
        except NotFound:
            pass
        labels = [f"sbx.session={self.session_id}", f"sbx.config={self.config.fingerprint()}"]
        for summary in self._api.containers(all=True, filters={"label": labels}):
            with contextlib.suppress(NotFound):
                return dict(self._api.inspect_container(summary["Id"]))
        return None

    def _create(self) -> str:
        cfg = self.config
        host_config = self._api.create_host_config(
            network_mode=cfg.network,
            cap_drop=list(cfg.cap_drop),
            cap_add=list(cfg.cap_add) or None,
            security_opt=list(cfg.security_opt),
            pids_limit=cfg.pids_limit,
            mem_limit=cfg.memory,
            nano_cpus=int(cfg.cpus * 1e9),
            read_only=cfg.read_only,
            tmpfs=dict(cfg.tmpfs),
            init=cfg.init,
        )
        labels = {
            "sbx": "1",
            "sbx.session": self.session_id,
            "sbx.worker": worker_label(),
            "sbx.config": cfg.fingerprint(),
            **cfg.fleet_labels(),
        }
        try:
            created = self._api.create_container(
                cfg.image,
                command=_KEEPALIVE,
                name=self.name,
                user=cfg.user,
                working_dir=cfg.workdir,
                environment=dict(cfg.env),
                labels=labels,
                host_config=host_config,
                detach=True,
            )
        except ImageNotFound as exc:
            raise BackendUnavailable(
                f"docker image {cfg.image!r} is not on this engine; pull or build it first"
            ) from exc
        except APIError as exc:
            if exc.status_code == 409:  # another worker created it first: use theirs
                return str(self._api.inspect_container(self.name)["Id"])
            raise SandboxError(f"cannot create container {self.name}: {exc}") from exc
        cid = str(created["Id"])
        try:
            self._api.start(cid)
        except APIError as exc:
            # A container that never ran must not be left behind.
            with contextlib.suppress(APIError):
                self._api.remove_container(cid, force=True)
            raise SandboxError(f"container {self.name} failed to start: {exc}") from exc
        self._last_heartbeat = time.monotonic()
        return cid

    # -- helper execs ------------------------------------------------------------

    def _helper(
        self, script: str, args: list[str], stdin: bytes | None = None
    ) -> tuple[int, bytes]:
        """Run ``sh -c SCRIPT sbx ARGS...`` in the container; ``(exit code, stdout)``.

        Raises :class:`SandboxDead` when the container is gone or stopped,
        :class:`ServiceUnreachable` when the engine or the command did not answer within
        :attr:`helper_deadline` (the command is left to itself: it may still run)."""
        cid = self._container(verify=False)
        cmd = ["sh", "-c", script, "sbx", *args]
        deadline = time.monotonic() + self.helper_deadline
        try:
            exec_id = self._api.exec_create(cid, cmd, stdin=stdin is not None)["Id"]
            stdout = self._run_exec(exec_id, stdin, deadline)
            code = self._api.exec_inspect(exec_id)["ExitCode"]
        except NotFound as exc:
            raise SandboxDead(
                f"container {self.name} is gone (nothing was done); the next call starts a new one"
            ) from exc
        except APIError as exc:
            if exc.status_code == 409:  # container stopped
                raise SandboxDead(
                    f"container {self.name} is not running (nothing was done); "
                    "the next call starts it again"
                ) from exc
            raise
        except OSError as exc:  # requests' errors and TimeoutError included
            raise ServiceUnreachable(
                f"a helper command in container {self.name} did not answer: {exc}"
            ) from exc
        return (code if isinstance(code, int) else -1), stdout

    def _run_exec(self, exec_id: str, stdin: bytes | None, deadline: float) -> bytes:
        """The stdout of exec ``exec_id`` (fed ``stdin``), read until it ends or ``deadline``
        (monotonic) passes: raises ``TimeoutError`` then."""
        channel = DockerExecChannel(self._api.exec_start(exec_id, socket=True))
        try:
            if stdin is not None:
                channel.write(stdin)
                channel.shutdown_write()
            chunks = []
            while chunk := channel.read(max(0.0, deadline - time.monotonic())):
                chunks.append(chunk)
            if chunk is None:
                raise TimeoutError(f"no answer within {self.helper_deadline:g} s")
            return b"".join(chunks)
        finally:
            channel.close()

    def _open(self) -> DockerExecChannel:
        cid = self._container(verify=True)
        cmd = ["sh", "-c", start_script(self.config.shell)]
        try:
            exec_id = self._api.exec_create(cid, cmd, stdin=True)["Id"]
            raw = self._api.exec_start(exec_id, socket=True)
        except (NotFound, APIError) as exc:
            raise SandboxDead(f"cannot start a shell in {self.name}: {exc}") from exc
        channel = DockerExecChannel(raw)
        pid = started_shell_pid(channel, self.shell.start_timeout, self.name)
        channel.on_close = lambda: self._kill_shell(channel, pid)
        self._channel = channel
        return channel

    def _kill_shell(self, channel: DockerExecChannel, pid: int) -> None:
        # A shell whose stream is still open is killed with its tree: a wedged one
        # (stopped, say) would not end on EOF. Not when the container goes away next.
        if self._closing or channel.peer_gone():
            return
        with contextlib.suppress(SandboxError, APIError):
            self._helper(scripts.KILL_TREE, ["9", str(pid)])

    def _kill_group(self, pgid: int, signum: int) -> None:
        scripts.kill_tree(self._helper, self._killed, pgid, signum)

    def _heartbeat(self) -> None:
        now = time.monotonic()
        if now - self._last_heartbeat < self.config.heartbeat_interval or self._cid is None:
            return
        self._last_heartbeat = now
        with contextlib.suppress(APIError):
            cmd = ["sh", "-c", 'touch -- "$1"', "sbx", self.config.heartbeat_path]
            exec_id = self._api.exec_create(self._cid, cmd)["Id"]
            self._api.exec_start(exec_id, detach=True)

    # -- the contract ------------------------------------------------------------

    def _shell_stream_gone(self) -> bool:
        return self._channel is not None and self._channel.peer_gone()

    def _check_sandbox(self) -> None:
        self._container(verify=True)  # notices (and repairs) a vanished container

    def close(self) -> None:
        """End the session shell and remove the container (unless ``remove_on_close`` is off)."""
        self._closing = self.config.remove_on_close
        self.shell.close()
        self._channel = None
        if self.config.remove_on_close:
            with contextlib.suppress(NotFound, APIError):
                self._api.remove_container(self._cid or self.name, force=True)
            self._cid = None

    @classmethod
    def reap_orphans(
        cls, config: BackendConfig, max_idle: float, keep: Callable[[str], bool]
    ) -> list[str]:
        cfg = config_of(DockerConfig, config)
        return reap_orphans(
            max_idle,
            client=docker_client(cfg.base_url),
            heartbeat_path=cfg.heartbeat_path,
            keep=keep,
            labels=cfg.fleet_labels(),
        )

    @classmethod
    def availability(cls, config: BackendConfig | None = None) -> tuple[bool, str]:
        try:
            docker_client(config_of(DockerConfig, config).base_url).ping()
        except Exception as exc:
            return False, f"docker engine not reachable: {exc}"
        return True, "ok"
