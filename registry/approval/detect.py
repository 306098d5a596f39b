"""Dangerous and hardline command detection: the public entry points.

Contract (docs/approvals.md; users script against it, keep exactly):

* ``detect_dangerous_command(command) -> (is_dangerous, pattern_key, description)``
* ``detect_hardline_command(command) -> (is_hardline, description)``

Both are pure, thread-safe and never raise for any ``str``. A hardline command
is also dangerous; ``detect_dangerous_command`` reports the hardline match
first. Mentions are not commands: quoted arguments of ``echo``, ``grep``,
``git commit -m`` etc. are data, so ``grep "rm -rf"`` is not flagged, while
anything bash would execute is analysed (see :mod:`registry.approval.analyzer`).

Both accept keyword-only ``env`` (the session's exported environment: resolves
``$X -rf dir`` when ``X`` was exported by an earlier call, and the session's
``HOME``/``PWD``) and ``protected`` (absolute paths whose writes need approval).
A command longer than ``max_bytes`` is not analysed: it is reported as the
dangerous ``command_too_long``. Analysis is bounded
(:class:`~registry.approval.limits.Budget`); a command it cannot finish is
reported as the dangerous ``analysis_budget_exhausted``.

:func:`analyze_command` exposes the full result (every finding, the simple
commands) for the policy layer; results for short commands are cached.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from registry.approval.analyzer import BACKGROUND_LOOP, BUDGET, NESTING, Analyzer, Finding
from registry.approval.limits import DEFAULT_MAX_COMMAND_BYTES, command_bytes
from registry.approval.rules import DANGEROUS_PATTERNS, HARDLINE_PATTERNS
from registry.approval.rules.dynamic import DYNAMIC_PATTERNS
from registry.approval.rules.fallback import FLAT_PATTERNS
from registry.approval.rules.forkbomb import FORK_BOMB
from registry.approval.shell.normalize import normalize_command

__all__ = [
    "ALL_PATTERN_KEYS",
    "HARDLINE_KEYS",
    "TOO_LONG",
    "Analysis",
    "Finding",
    "analyze_command",
    "detect_dangerous_command",
    "detect_hardline_command",
]

TOO_LONG = ("command_too_long", "command longer than the configured maximum; not analysed")
PTY_UNMODELLED = "pty_input_unmodelled"  # set by the guard for pty input it cannot reconstruct
HARDLINE_KEYS: frozenset[str] = frozenset({p.key for p in HARDLINE_PATTERNS} | {FORK_BOMB[0]})
ALL_PATTERN_KEYS: frozenset[str] = frozenset(
    {p.key for p in DANGEROUS_PATTERNS}
    | {p.key for p in DYNAMIC_PATTERNS}
    | HARDLINE_KEYS
    | {NESTING[0], BUDGET[0], TOO_LONG[0], BACKGROUND_LOOP[0], PTY_UNMODELLED}
    | {k for k, _, _ in FLAT_PATTERNS}
)
_CACHE_MAX_LEN = 4096
_VAR_NAME_RE = re.compile(r"\$\{?!?([A-Za-z_][A-Za-z0-9_]*)")
_ALWAYS_READ = ("HOME", "PWD", "IFS")


@dataclass(frozen=True, slots=True)
class Analysis:
    """Everything the detector learned about one command string.

    ``findings`` in report order (no duplicate keys); ``notices`` the everyday
    forms of a family that need no approval (``rm -rf node_modules`` under
    ``recursive_delete``), which deny rules still match; ``segments`` the text of
    every simple command found at any depth, with and without wrappers such as
    ``sudo`` (deny rules are matched against each); ``simple`` is True when
    the command is exactly one simple command with nothing nested and balanced
    quotes, the only shape a literal/glob allowlist entry may match.
    """

    command: str
    normalized: str
    findings: tuple[Finding, ...]
    segments: tuple[str, ...]
    simple: bool
    notices: tuple[Finding, ...] = ()

    @property
    def hardline(self) -> Finding | None:
        """The first hardline finding, if any."""
        return next((f for f in self.findings if f.hardline), None)

    @property
    def dangerous(self) -> Finding | None:
        """The finding to report: the first hardline one, else the first one."""
        return self.hardline or (self.findings[0] if self.findings else None)


def _analyze(
    command: str,
    env: tuple[tuple[str, str], ...] | None,
    protected: tuple[str, ...],
    max_bytes: int,
) -> Analysis:
    if command_bytes(command, max_bytes) > max_bytes:
        finding = Finding(TOO_LONG[0], TOO_LONG[1], False)
        return Analysis(command, command[:256], (finding,), (), False)
    analyzer = Analyzer(dict(env) if env is not None else None, protected)
    analyzer.analyze(command)
    simple = analyzer.commands == 1 and analyzer.scripts == 1 and analyzer.balanced
    # Hardline findings first, so a capped analysis still reports them ahead.
    findings = sorted(analyzer.findings.values(), key=lambda f: not f.hardline)
    return Analysis(
        command=command,
        normalized=analyzer.normalized or normalize_command(command),
        findings=tuple(findings),
        segments=tuple(dict.fromkeys(s for s in analyzer.segments if s)),
        simple=simple,
        notices=tuple(n for k, n in analyzer.notices.items() if k not in analyzer.findings),
    )


_analyze_cached = lru_cache(maxsize=2048)(_analyze)


def _env_key(command: str, env: Mapping[str, str] | None) -> tuple[tuple[str, str], ...] | None:
    """The part of ``env`` the command can read (so cached results stay correct)."""
    if env is None:
        return None
    names = set(_VAR_NAME_RE.findall(command)) | set(_ALWAYS_READ)
    if "$@" in command or "${!" in command or "$*" in command:
        names |= set(env)
    return tuple(sorted((n, env[n]) for n in names if n in env))


def analyze_command(
    command: str,
    *,
    env: Mapping[str, str] | None = None,
    protected: tuple[str, ...] | list[str] = (),
    max_bytes: int = DEFAULT_MAX_COMMAND_BYTES,
) -> Analysis:
    """Analyse ``command`` (see :class:`Analysis`). Never raises for a ``str``."""
    if not isinstance(command, str):
        command = str(command)
    key = _env_key(command, env)
    protected_key = tuple(protected)
    if len(command) <= _CACHE_MAX_LEN:
        return _analyze_cached(command, key, protected_key, max_bytes)
    return _analyze(command, key, protected_key, max_bytes)


def detect_dangerous_command(
    command: str,
    *,
    env: Mapping[str, str] | None = None,
    protected: tuple[str, ...] | list[str] = (),
) -> tuple[bool, str | None, str | None]:
    """Return ``(is_dangerous, pattern_key, description)`` for ``command``.

    Hardline commands are dangerous too and are reported first. Benign
    commands and mentions (``echo "rm -rf /"``) give ``(False, None, None)``.
    """
    finding = analyze_command(command, env=env, protected=protected).dangerous
    if finding is None:
        return False, None, None
    return True, finding.key, finding.description


def detect_hardline_command(
    command: str,
    *,
    env: Mapping[str, str] | None = None,
) -> tuple[bool, str | None]:
    """Return ``(is_hardline, description)``: commands that may never run anywhere."""
    finding = analyze_command(command, env=env).hardline
    if finding is None:
        return False, None
    return True, finding.description
