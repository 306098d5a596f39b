"""Settings of the local backend (``SBX_LOCAL_*``); docs/backends.md and docs/security.md."""

from __future__ import annotations

import posixpath
from typing import Literal, Self

from pydantic import field_validator

from environments.config import BackendConfig, WorkerContext

NO_ISOLATION = "no isolation, trusted code only"
"""What sbx says wherever the local backend runs without its jail."""


class LocalConfig(BackendConfig):
    """Settings of the local backend (``SBX_LOCAL_*``)."""

    type: Literal["local"] = "local"
    cwd: str | None = None
    """The workspace: starting directory of a new session, bound read-write into the jail;
    the worker's cwd when unset."""
    shell: str = "bash"
    """Shell for sessions; ``sh`` is used when this one is not installed."""
    forward_env: tuple[str, ...] = ()
    """Worker variables passed to sandboxes besides the credential-free baseline."""
    kill_grace: float = 2.0
    """Seconds between TERM and KILL when a command times out."""
    isolation: Literal["bwrap", "none"] = "bwrap"
    """``bwrap``: every session shell and background process runs in a bubblewrap jail;
    ``none``: directly on the worker's host as the worker's user (trusted code only)."""
    network: Literal["none", "host"] = "none"
    """``none``: the jail has its own network namespace with only a loopback interface, so
    services on the host (its loopback included) are unreachable; ``host``: the host's."""
    filesystem: Literal["system", "host"] = "system"
    """What of the host the jail sees read-only: ``system`` -- the system directories
    (``/usr``, ``/etc`` and the ``/bin``, ``/lib`` links); ``host`` -- the whole file
    system except ``/run``, ``/var/run``, ``/var/tmp`` and the hidden paths."""
    binds: tuple[str, ...] = ()
    """Host directories the jail sees read-write at the same path (besides the workspace)."""
    ro_binds: tuple[str, ...] = ()
    """Host directories the jail sees read-only at the same path."""
    hide: tuple[str, ...] = ()
    """Host paths no jail sees (the worker adds its ``SBX_HOME``, spool and sockets)."""
    state_dir: str | None = None
    """Where per-session jail directories live (private ``/tmp``, home, process files);
    the worker sets a private directory outside ``SBX_HOME``."""
    bwrap: str = "bwrap"
    """The bubblewrap executable."""

    @field_validator("cwd", "state_dir")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not posixpath.isabs(value):
            raise ValueError("must be an absolute path")
        return value

    @field_validator("binds", "ro_binds", "hide")
    @classmethod
    def _absolute_paths(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for path in value:
            if not posixpath.isabs(path) or posixpath.normpath(path) == "/":
                raise ValueError("must be absolute paths other than /")
        return tuple(posixpath.normpath(p) for p in value)

    def for_worker(self, context: WorkerContext) -> Self:
        return self.model_copy(
            update={
                "state_dir": self.state_dir or context.state_dir,
                "hide": tuple(
                    dict.fromkeys(
                        (*self.hide, *(posixpath.normpath(p) for p in context.private_paths))
                    )
                ),
                "forward_env": tuple(dict.fromkeys((*self.forward_env, *context.forward_env))),
            }
        )
