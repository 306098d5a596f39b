"""Dangerous and hardline command detection: the public entry points.

Contract (CONTRACT.md, keep exactly):

* ``detect_dangerous_command(command) -> (is_dangerous, pattern_key, description)``
* ``detect_hardline_command(command) -> (is_hardline, description)``

Both are pure, thread-safe and never raise for any ``str``. A hardline command
is also dangerous; ``detect_dangerous_command`` reports the hardline match
first. Mentions are not commands: quoted arguments of ``echo``, ``grep``,
``git commit -m`` etc. are data, so ``grep "rm -rf"`` is not flagged, while
anything bash would execute is analysed: compound commands, ``$(...)``,
backticks, ``<(...)``, ``bash -c``/``sh -c``/``eval`` strings, here-documents
fed to a shell, ``xargs``/``find -exec`` commands and more (see
:mod:`registry.approval.nested`).

:func:`analyze_command` exposes the full result (every finding, the simple
commands) for the policy layer; results for short commands are cached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from registry.approval.commands import Cmd, resolve
from registry.approval.dataflow import inline_code
from registry.approval.fallback import FLAT_PATTERNS
from registry.approval.hardline import (
    FORK_BOMB,
    HARDLINE_PATTERNS,
    is_fork_bomb_code,
    is_fork_bomb_text,
)
from registry.approval.nested import nested_scripts
from registry.approval.normalize import normalize_command, splice_quotes
from registry.approval.patterns import DANGEROUS_PATTERNS
from registry.approval.shell import Word, parse_script

__all__ = [
    "ALL_PATTERN_KEYS",
    "HARDLINE_KEYS",
    "Analysis",
    "Finding",
    "analyze_command",
    "detect_dangerous_command",
    "detect_hardline_command",
]

MAX_DEPTH = 8
MAX_SCRIPTS = 256
_CACHE_MAX_LEN = 4096
NESTING = ("nesting_too_deep", "command nests scripts too deeply to analyse")
HARDLINE_KEYS: frozenset[str] = frozenset({p.key for p in HARDLINE_PATTERNS} | {FORK_BOMB[0]})
ALL_PATTERN_KEYS: frozenset[str] = frozenset(
    {p.key for p in DANGEROUS_PATTERNS}
    | HARDLINE_KEYS
    | {NESTING[0]}
    | {k for k, _, _ in FLAT_PATTERNS}
)

_VAR_RE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_BRACE_LIST_RE = re.compile(r"^\{[^{}\s]*,[^{}\s]*\}$")
_DECLARERS = frozenset({"export", "declare", "typeset", "local", "readonly"})


@dataclass(frozen=True, slots=True)
class Finding:
    """One matched pattern: stable ``key``, human ``description``, ``hardline`` flag."""

    key: str
    description: str
    hardline: bool


@dataclass(frozen=True, slots=True)
class Analysis:
    """Everything the detector learned about one command string.

    ``findings`` in report order (no duplicate keys); ``segments`` the text of
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

    @property
    def hardline(self) -> Finding | None:
        """The first hardline finding, if any."""
        return next((f for f in self.findings if f.hardline), None)

    @property
    def dangerous(self) -> Finding | None:
        """The finding to report: the first hardline one, else the first one."""
        return self.hardline or (self.findings[0] if self.findings else None)


class _Analyzer:
    """Walks a script and everything nested in it, collecting findings."""

    def __init__(self) -> None:
        self.normalized = ""  # of the top-level script
        self.findings: dict[str, Finding] = {}
        self.segments: list[str] = []
        self.commands = 0
        self.scripts = 0
        self.balanced = True

    def add(self, key: str, description: str, hardline: bool) -> None:
        prev = self.findings.get(key)
        if prev is None or (hardline and not prev.hardline):
            self.findings[key] = Finding(key, description, hardline)

    def run(self, text: str, depth: int) -> None:
        self.scripts += 1
        if depth > MAX_DEPTH or self.scripts > MAX_SCRIPTS:
            self.add(NESTING[0], NESTING[1], False)
            return
        norm = normalize_command(text)
        if depth == 0:
            self.normalized = norm
        parsed = parse_script(norm)
        if not parsed.balanced:
            self.balanced = False
        env: dict[str, str] = {}
        nested: list[str] = []
        for pipeline in parsed.pipelines:
            cmds: list[Cmd] = []
            for sc in pipeline:
                for w in (*sc.assigns, *sc.words):
                    nested.extend(w.subs)
                for r in sc.redirects:
                    nested.extend(r.target.subs)
                    nested.extend(r.subs)
                if not sc.words:
                    _assign(env, [a.text for a in _static_subs(sc.assigns, split=False)])
                words = _brace_expand(
                    _expand(_static_subs(sc.words), env) if env else _static_subs(sc.words)
                )
                cmd = resolve(words, sc.redirects)
                if cmd is None:
                    continue
                self.commands += 1
                self.segments.append(" ".join(w.text for w in words))
                if cmd.wrappers:
                    self.segments.append(" ".join(cmd.argv))
                if cmd.name in _DECLARERS:
                    _assign(env, cmd.args)
                cmds.append(cmd)
            for idx, cmd in enumerate(cmds):
                cmd.pipeline = cmds
                cmd.index = idx
            for cmd in cmds:
                self.match(cmd)
                nested.extend(nested_scripts(cmd))
        if is_fork_bomb_text(" ".join(t for _, t in parsed.tokens)):
            self.add(FORK_BOMB[0], FORK_BOMB[1], True)
        if not parsed.balanced:
            flat = splice_quotes(norm)
            for key, rx, desc in FLAT_PATTERNS:
                if rx.search(flat):
                    self.add(key, desc, False)
        for script in nested:
            if script.strip():
                self.run(script, depth + 1)

    def match(self, cmd: Cmd) -> None:
        for p in HARDLINE_PATTERNS:
            if p.match(cmd):
                self.add(p.key, p.description, True)
        for p in DANGEROUS_PATTERNS:
            if p.match(cmd):
                self.add(p.key, p.description, False)
        code = inline_code(cmd)
        if code and is_fork_bomb_code(code):
            self.add(FORK_BOMB[0], FORK_BOMB[1], True)


def _assign(env: dict[str, str], words: list[str]) -> None:
    """Record ``NAME=value`` words so later ``$NAME`` uses can be expanded."""
    for w in words:
        name, eq, value = w.partition("=")
        if eq and name.rstrip("+").isidentifier():
            env[name.rstrip("+")] = _VAR_RE.sub(
                lambda m: env.get(m.group(1) or m.group(2), m.group(0)), value
            )


def _expand(words: list[Word], env: dict[str, str]) -> list[Word]:
    """Expand variables assigned earlier in the script; split unquoted results like bash."""
    out: list[Word] = []
    for w in words:
        if "$" not in w.text:
            out.append(w)
            continue
        text = _VAR_RE.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), w.text)
        if text == w.text:
            out.append(w)
        elif w.quoted:
            out.append(Word(text, w.raw, True, w.subs))
        else:
            parts = text.split() or [""]
            out.append(Word(parts[0], w.raw, False, w.subs))
            out.extend(Word(p, p) for p in parts[1:])
    return out


def _echo_output(script: str) -> str | None:
    """Output of a substitution that is a lone ``echo``/``printf`` of literals, else None."""
    if "$" in script or "`" in script:
        return None
    parsed = parse_script(script)
    if len(parsed.pipelines) != 1 or len(parsed.pipelines[0]) != 1:
        return None
    sc = parsed.pipelines[0][0]
    if sc.redirects or not sc.words or sc.words[0].text not in ("echo", "printf"):
        return None
    args = [w.text for w in sc.words[1:]]
    if sc.words[0].text == "echo":
        args = [a for a in args if a not in ("-n", "-e", "-E", "-ne", "-en")]
    elif len(args) > 1 and args[0] in ("%s", "%s\\n", "%b"):
        args = args[1:]
    return " ".join(args)


def _static_subs(words: list[Word], split: bool = True) -> list[Word]:
    """Replace ``$(echo rm)``/`` `printf rm` `` by their output (an easy way to hide a name)."""
    out: list[Word] = []
    for w in words:
        if not w.subs:
            out.append(w)
            continue
        text = w.text
        for sub in w.subs:
            value = _echo_output(sub)
            if value is not None:
                text = text.replace(f"$({sub})", value).replace(f"`{sub}`", value)
        if text == w.text:
            out.append(w)
        elif w.quoted or not split:
            out.append(Word(text, w.raw, w.quoted, w.subs))
        else:
            parts = text.split() or [""]
            out.append(Word(parts[0], w.raw, False, w.subs))
            out.extend(Word(p, p) for p in parts[1:])
    return out


def _brace_expand(words: list[Word]) -> list[Word]:
    """``{rm,-rf,/}`` in command position expands to ``rm -rf /`` in bash."""
    if words and not words[0].quoted and _BRACE_LIST_RE.match(words[0].text):
        parts = words[0].text[1:-1].split(",")
        return [Word(p, p) for p in parts] + words[1:]
    return words


def _analyze(command: str) -> Analysis:
    analyzer = _Analyzer()
    try:
        analyzer.run(command, 0)
    except RecursionError:
        analyzer.add(NESTING[0], NESTING[1], False)
    simple = analyzer.commands == 1 and analyzer.scripts == 1 and analyzer.balanced
    return Analysis(
        command=command,
        normalized=analyzer.normalized or normalize_command(command),
        findings=tuple(analyzer.findings.values()),
        segments=tuple(dict.fromkeys(s for s in analyzer.segments if s)),
        simple=simple,
    )


_analyze_cached = lru_cache(maxsize=2048)(_analyze)


def analyze_command(command: str) -> Analysis:
    """Analyse ``command`` (see :class:`Analysis`). Never raises for a ``str``."""
    if not isinstance(command, str):
        command = str(command)
    if len(command) <= _CACHE_MAX_LEN:
        return _analyze_cached(command)
    return _analyze(command)


def detect_dangerous_command(command: str) -> tuple[bool, str | None, str | None]:
    """Return ``(is_dangerous, pattern_key, description)`` for ``command``.

    Hardline commands are dangerous too and are reported first. Benign
    commands and mentions (``echo "rm -rf /"``) give ``(False, None, None)``.
    """
    finding = analyze_command(command).dangerous
    if finding is None:
        return False, None, None
    return True, finding.key, finding.description


def detect_hardline_command(command: str) -> tuple[bool, str | None]:
    """Return ``(is_hardline, description)``: commands that may never run anywhere."""
    finding = analyze_command(command).hardline
    if finding is None:
        return False, None
    return True, finding.description
