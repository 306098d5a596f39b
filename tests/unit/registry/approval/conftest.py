"""Registers the approval tests' fixtures (defined in ``fixtures_approval``)."""

from __future__ import annotations

from .fixtures_approval import (  # noqa: F401 (fixtures are found by name)
    clock,
    closed_port,
    judge_server,
    redis_client,
    redis_server,
)
