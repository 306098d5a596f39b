"""Settings of the ``docker`` backend, the shared engine clients, and container names."""

from __future__ import annotations

import hashlib
import threading
from typing import Literal

import docker
from docker.errors import DockerException
from pydantic import Field

from environments.backends.naming import sandbox_name
from environments.config import BackendConfig
from environments.errors import BackendUnavailable


class DockerConfig(BackendConfig):
    """Settings of the docker backend (``SBX_DOCKER_*``). Defaults are the hardened ones."""

    type: Literal["docker"] = "docker"
    image: str = "debian:bookworm-slim"
    base_url: str | None = None
    """Engine address (``unix:///...``, ``tcp://...``); ``DOCKER_HOST`` when unset."""
    network: str = "none"
    user: str = "65534:65534"
    workdir: str = "/workspace"
    read_only: bool = True
    tmpfs: dict[str, str] = {
        "/workspace": "rw,exec,nosuid,nodev,size=1g,mode=1777",
        "/tmp": "rw,exec,nosuid,nodev,size=512m,mode=1777",
    }
    cap_drop: tuple[str, ...] = ("ALL",)
    cap_add: tuple[str, ...] = ()
    security_opt: tuple[str, ...] = ("no-new-privileges",)
    pids_limit: int = 512
    memory: str = "2g"
    cpus: float = 1.0
    init: bool = True
    env: dict[str, str] = {}
    """Variables set in the container (the worker's own environment never is)."""
    shell: Literal["auto", "sh", "bash"] = "auto"
    kill_grace: float = 2.0
    heartbeat_interval: float = 60.0
    """At most this often a call touches ``heartbeat_path`` (idle clock of :func:`reap_orphans`)."""
    heartbeat_path: str = "/tmp/.sbx-heartbeat"
    remove_on_close: bool = True
    fleet: str = Field(default="default", pattern=r"^[A-Za-z0-9_.-]{1,63}$")
    """The deployment its containers belong to (label ``sbx.fleet``): the orphan sweep
    removes only containers of its own fleet, so deployments sharing an engine leave
    each other's sandboxes alone."""

    def fingerprint(self) -> str:
        """Hash of the settings that shape a container; part of its name. A fleet other
        than the default is too: two deployments' sessions of one id get two containers
        (the default leaves the names containers had before fleets existed)."""
        unshaping = {"kill_grace", "heartbeat_interval", "remove_on_close", "base_url"}
        if self.fleet == "default":
            unshaping.add("fleet")
        shaping = self.model_dump(exclude=unshaping)
        return hashlib.sha256(repr(sorted(shaping.items())).encode()).hexdigest()[:12]


_clients: dict[str | None, docker.DockerClient] = {}
_clients_lock = threading.Lock()


def docker_client(base_url: str | None = None) -> docker.DockerClient:
    """A client per engine address, shared by every sandbox of this process."""
    with _clients_lock:
        client = _clients.get(base_url)
        if client is None:
            try:
                client = docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
            except DockerException as exc:
                raise BackendUnavailable(f"docker engine not reachable: {exc}") from exc
            _clients[base_url] = client
        return client


def container_name(session_id: str, config: DockerConfig) -> str:
    """Deterministic container name: a restarted worker (or a racing one) finds the same."""
    return sandbox_name(session_id, config.fingerprint())
