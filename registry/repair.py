"""Malformed-argument repair: one chance to fix arguments that failed validation.

A repair callback has the shape ``repair(tool_name, raw_args, error, schema)`` and
returns replacement arguments (a dict or a JSON string) or ``None`` to give up.
:meth:`registry.core.ToolRegistry.dispatch` calls it at most once per call and
only after the tool was found: an unknown tool name is never repaired (a guessed
name could run a different tool than the model meant). A repair that raises is
treated as "no repair" and the original validation error is returned.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core import RepairFn, ToolEntry

log = logging.getLogger(__name__)


def attempt_repair(repair: RepairFn, entry: ToolEntry, raw_args: Any, error: str) -> Any | None:
    """The repaired arguments, or ``None`` when the callback declined or failed."""
    try:
        fixed = repair(entry.name, raw_args, error, entry.parameters)
    except Exception as exc:
        log.warning("argument repair for %s raised %s: %s", entry.name, type(exc).__name__, exc)
        return None
    if fixed is None:
        return None
    log.info("arguments of %s repaired after: %s", entry.name, error)
    return fixed
