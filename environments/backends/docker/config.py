"""Settings of the ``docker`` backend, the shared engine clients, and container names."""

from __future__ import annotations

import threading
from typing import Literal

import docker
from docker.errors import DockerException

from environments.backends.naming import sandbox_name
from environments.config import FleetConfig
from environments.errors import BackendUnavailable


class DockerConfig(FleetConfig):
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

    def fingerprint(self) -> str:
        """Hash of the settings that shape a container (and its fleet, unless the
        default); part of its name."""
        unshaping = {"kill_grace", "heartbeat_interval", "remove_on_close", "base_url"}
        return self.shaping_hash(set(type(self).model_fields) - unshaping)


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
