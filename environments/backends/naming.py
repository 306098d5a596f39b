"""Names and labels remote backends give the sandboxes they create.

A sandbox's name is derived from its session id and the settings that shaped
it, so a restarted worker (or a racing one) finds the same sandbox; the worker
label says which process made or last used it (for sweeps scoped to a worker).
"""

from __future__ import annotations

import hashlib
import os
import re
import socket


def sandbox_name(session_id: str, fingerprint: str) -> str:
    """``sbx-<session slug>-<hash of session and settings>``: at most 57 characters of
    ``[A-Za-z0-9_.-]`` (valid as a container name and as a Modal object name)."""
    slug = re.sub(r"[^a-zA-Z0-9_.-]", "-", session_id)[:40].strip("-.") or "s"
    digest = hashlib.sha256(f"{session_id}\0{fingerprint}".encode()).hexdigest()[:12]
    return f"sbx-{slug}-{digest}"


def worker_label() -> str:
    """``host:pid`` of this worker process."""
    return f"{socket.gethostname()}:{os.getpid()}"
