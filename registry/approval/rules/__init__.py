"""The rules: one module per family of dangerous commands, the hardline apart.

Contract: every rule is a :class:`~registry.approval.rules.base.Pattern`
``(key, match, description)`` whose ``match`` takes one effective
:class:`~registry.approval.shell.resolve.Cmd` (wrappers removed, words
expanded, its pipeline and the analysis
:class:`~registry.approval.shell.state.Context` attached). Keys are stable
identifiers users put in ``command_allowlist``/``command_denylist`` and approve
per session: never rename one. :data:`HARDLINE_PATTERNS` never run anywhere;
:data:`DANGEROUS_PATTERNS` (ordered, specific before general) need approval.
"""

from __future__ import annotations

from registry.approval.rules.base import Pattern
from registry.approval.rules.datastores import DATASTORE_PATTERNS
from registry.approval.rules.dynamic import DYNAMIC_PATTERNS
from registry.approval.rules.files_damage import DAMAGE_PATTERNS
from registry.approval.rules.files_delete import DELETE_PATTERNS
from registry.approval.rules.hardline import HARDLINE_PATTERNS
from registry.approval.rules.infra import INFRA_PATTERNS
from registry.approval.rules.interpreters import INTERPRETER_PATTERNS
from registry.approval.rules.kills import KILL_PATTERNS
from registry.approval.rules.other import OTHER_PATTERNS
from registry.approval.rules.secrets import SECRET_PATTERNS
from registry.approval.rules.system import SYSTEM_PATTERNS
from registry.approval.rules.vcs import VCS_PATTERNS

__all__ = ["DANGEROUS_PATTERNS", "HARDLINE_PATTERNS", "PATTERN_KEYS", "Pattern"]

DANGEROUS_PATTERNS: list[Pattern] = [
    *SECRET_PATTERNS,
    *DELETE_PATTERNS,
    *DAMAGE_PATTERNS,
    *DATASTORE_PATTERNS,
    *VCS_PATTERNS,
    *INFRA_PATTERNS,
    *INTERPRETER_PATTERNS,
    *SYSTEM_PATTERNS,
    *KILL_PATTERNS,
    *OTHER_PATTERNS,
    *DYNAMIC_PATTERNS,
]

PATTERN_KEYS: frozenset[str] = frozenset(p.key for p in DANGEROUS_PATTERNS)
