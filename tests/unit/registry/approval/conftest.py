"""Registers the approval tests' fixtures (defined in ``fixtures_approval``)."""

from __future__ import annotations

from .fixtures_approval import (  # noqa: F401 (fixtures are found by name)
    clock,
    closed_port,
    config_path,
    guard_factory,
    judge_server,
    make_store,
    redis_client,
    redis_server,
)
