"""Sandbox backends behind one contract (:class:`environments.base.Environment`).

This package imports none of ``worker``, ``registry`` or ``process_registry``.
"""

from .base import Environment, ExecResult, SpawnedProcess
from .errors import (
    BackendUnavailable,
    InvalidCommand,
    SandboxDead,
    SandboxError,
    UnknownBackend,
    WorkdirNotFound,
)

__all__ = [
    "BackendUnavailable",
    "Environment",
    "ExecResult",
    "InvalidCommand",
    "SandboxDead",
    "SandboxError",
    "SpawnedProcess",
    "UnknownBackend",
    "WorkdirNotFound",
]
