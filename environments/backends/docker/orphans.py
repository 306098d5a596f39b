"""Removing containers that dead workers left behind, once idle long enough."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import docker
from docker.errors import APIError, NotFound

from environments.backends.docker.config import DockerConfig, docker_client


def _parse_time(value: str | None) -> float:
    """Seconds since the epoch of a docker timestamp (nanosecond precision, ``Z``); 0 if unset."""
    if not value or value.startswith("0001-"):
        return 0.0
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", value)
    if not m:
        return 0.0
    frac = (m.group(2) or ".0")[:7]
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(m.group(1) + frac + tz).timestamp()


def last_activity(api: Any, info: dict[str, Any], heartbeat_path: str) -> float:
    """When the container was last used: creation, start, stop, or its heartbeat file."""
    state = info.get("State", {})
    times = [
        _parse_time(info.get("Created")),
        _parse_time(state.get("StartedAt")),
        _parse_time(state.get("FinishedAt")),
    ]
    if state.get("Running"):
        with contextlib.suppress(APIError, ValueError):
            cmd = ["sh", "-c", 'stat -c %Y -- "$1" 2>/dev/null', "sbx", heartbeat_path]
            exec_id = api.exec_create(info["Id"], cmd)["Id"]
            out, _ = api.exec_start(exec_id, demux=True)
            if out and out.strip().isdigit():
                times.append(float(out.strip()))
    return max(times)


def reap_orphans(
    max_idle: float,
    *,
    now: float | None = None,
    client: docker.DockerClient | None = None,
    labels: dict[str, str] | None = None,
    heartbeat_path: str = DockerConfig.model_fields["heartbeat_path"].default,
    keep: Callable[[str], bool] | None = None,
) -> list[str]:
    """Remove sbx containers (running ones included) idle for more than ``max_idle`` seconds.

    ``labels`` narrows the sweep (for example to one worker's containers); ``now``
    is wall-clock seconds since the epoch; a container whose session ``keep``
    claims stays. Returns the names removed.
    """
    api: Any = (client or docker_client()).api
    now = time.time() if now is None else now
    label_filter = ["sbx=1", *(f"{k}={v}" for k, v in (labels or {}).items())]
    removed: list[str] = []
    for summary in api.containers(all=True, filters={"label": label_filter}):
        try:
            info = api.inspect_container(summary["Id"])
        except NotFound:
            continue
        session = (info.get("Config", {}).get("Labels") or {}).get("sbx.session", "")
        if keep is not None and session and keep(session):
            continue
        if now - last_activity(api, info, heartbeat_path) <= max_idle:
            continue
        with contextlib.suppress(NotFound, APIError):
            api.remove_container(info["Id"], force=True)
            removed.append(str(info["Name"]).lstrip("/"))
    return removed
