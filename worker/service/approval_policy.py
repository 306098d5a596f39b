"""The approval policy a worker enforces: read from the settings at start, replaced only
on the operator's explicit reload, and audited across restarts.

The policy lives in config.yaml, which a worker must never let a sandbox weaken: a
changed file takes effect only at the next start or reload, and each time the
policy in force becomes looser than the one applied before (by this worker or the
last one on the ledger), a warning says what loosened.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import redis

from registry.approval import ApprovalGuard
from registry.approval.config import ApprovalSettings, loosened
from worker.settings import Settings

log = logging.getLogger(__name__)

APPLIED_KEY = "sbx:approval:applied-policy"
"""The last policy a worker put in force (JSON), for the next one to compare with."""


def policy_reader(settings: Settings) -> Callable[[], Any]:
    """The policy document: the one ``settings`` read at start, then config.yaml anew."""
    first: list[dict[str, Any]] = [settings.approval_document()]

    def read() -> Any:
        if first:
            return first.pop()
        return Settings().approval_document()

    return read


def audit(client: redis.Redis, guard: ApprovalGuard) -> list[str]:
    """Compare the policy in force with the last one applied; warn about what loosened
    and record this one. Returns the loosenings found."""
    current, _ = guard.config.get()
    changes: list[str] = []
    try:
        previous = client.get(APPLIED_KEY)
        if previous is not None:
            changes = loosened(ApprovalSettings.model_validate_json(previous), current)
        client.set(APPLIED_KEY, current.model_dump_json())
    except (redis.RedisError, ValueError):
        log.warning("could not compare the approval policy with the last one applied")
    for change in changes:
        log.warning("approval policy loosened since it was last applied: %s", change)
    return changes


def reload(client: redis.Redis, guard: ApprovalGuard) -> list[str]:
    """The operator's reload: read config.yaml again and put it in force (audited)."""
    guard.config.reload()
    return audit(client, guard)
