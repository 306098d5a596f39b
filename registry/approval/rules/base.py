"""The rule type and small helpers every family uses.

Contract: a :class:`Pattern` is ``(key, match, description[, routine])``;
``match`` takes one effective :class:`~registry.approval.shell.resolve.Cmd`
and never raises for any command the shell model produces.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from registry.approval.shell.args import has_long, short_flags
from registry.approval.shell.resolve import Cmd

__all__ = ["Pattern", "recursive_flag", "static_operand"]


class Pattern(NamedTuple):
    """A named matcher: ``key`` (stable, used in allowlists), ``match``, ``description``.

    ``routine`` (optional) matches the everyday forms of the same family that
    need no approval (``rm -rf node_modules`` for ``recursive_delete``); the
    detector reports them as notices, so a ``command_denylist`` entry naming
    the key still blocks them. ``names`` (optional) lists every program name
    ``match`` and ``routine`` can accept: the detector skips the rule for
    other programs without calling it.
    """

    key: str
    match: Callable[[Cmd], bool]
    description: str
    routine: Callable[[Cmd], bool] | None = None
    names: frozenset[str] | None = None


def recursive_flag(cmd: Cmd) -> bool:
    """``-r``/``-R``/``--recursive`` among the options of ``cmd``."""
    flags = short_flags(cmd.args)
    return "r" in flags or "R" in flags or has_long(cmd.args, "recursive")


def static_operand(cmd: Cmd, value: str) -> bool:
    """True when every argument equal to ``value`` is fully known (no unknown expansion)."""
    return all(not cmd.arg_unknown(i) for i, a in enumerate(cmd.args) if a == value)
