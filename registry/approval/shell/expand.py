"""Word expansion as bash performs it, as far as the values are statically known.

Contract: :func:`expand_words` turns the words of one simple command into the
argument vectors bash could run, given :class:`Vars` (what the analysis knows
about variables at that point). It performs brace expansion, parameter
expansion (every ``${...}`` operator of :mod:`.params`, arrays, ``"$@"``,
indirect ``${!x}``), command substitution when the substituted script's output
is static (``$(echo rm)``, ``$(printf '\\x72m')``, ``$(which rm)``,
``$(mktemp -d)``), and word splitting on ``IFS`` (also a reassigned one).

A variable can have several candidate values (assigned on different paths, a
``for`` loop list); each combination is a separate argv variant, at most
:data:`MAX_VARIANTS`. What cannot be known stays literal in the text and marks
the word ``unknown``; names whose value never changes what a command does
(``$HOME``, ``$PWD``, ``$$``...) stay literal without that mark. Never raises.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from registry.approval.shell.args import word_set
from registry.approval.shell.lexer import Lexer
from registry.approval.shell.params import apply_operator
from registry.approval.shell.syntax import Word

__all__ = ["MAX_VARIANTS", "Vars", "brace_expand", "expand_assignment", "expand_words"]

MAX_VARIANTS = 8
MAX_CANDIDATES = 8
_SUB, _VAR = 1, 2  # Word.unknown: a substitution's output / a variable's value is unknown
_FIELD_SEP = "\x1f"  # separates the elements of "$@" / "${a[@]}" in an expanded text
_PLACEHOLDER_HOME = "/home/user"
# Left literal and not "unknown": these never turn a command into another one.
_INERT = word_set(
    """
    HOME PWD OLDPWD USER LOGNAME TMPDIR HOSTNAME UID EUID RANDOM SECONDS LINENO BASHPID PPID
    SRANDOM EPOCHSECONDS EPOCHREALTIME
    """
)
_SPECIAL_VALUES = {"$": "4242", "!": "4242", "?": "0", "#": "0", "-": "hB", "0": "bash"}
_PARAM_RE = re.compile(
    r"^(?P<len>#)?(?P<ind>!)?(?P<name>[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])"
    r"(?P<idx>\[[^\]]*\])?(?P<op>.*)$",
    re.DOTALL,
)
_SIMPLE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#?$!-]")
_BRACE_RE = re.compile(r"\{([^{}]*)\}")
_SEQ_RE = re.compile(r"^(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])$")

# A command substitution's script -> its static output, or None.
SubValue = Callable[[str, "Vars"], str | None]


@dataclass
class Vars:
    """Variables known at one point of a script: candidates per name, arrays, positionals.

    ``env`` is the session's exported environment when the caller knows it
    (authoritative for the names it holds); ``cwd`` the working directory when
    followed. A name in ``unknown`` was assigned a value that cannot be known.
    """

    env: Mapping[str, str] | None = None
    cwd: str | None = None
    scalars: dict[str, list[str]] = field(default_factory=dict)
    arrays: dict[str, list[list[str]]] = field(default_factory=dict)
    positional: list[list[str]] = field(default_factory=list)
    unknown: set[str] = field(default_factory=set)

    def copy(self) -> Vars:
        return Vars(self.env, self.cwd, {k: list(v) for k, v in self.scalars.items()},
                    {k: list(v) for k, v in self.arrays.items()},
                    list(self.positional), set(self.unknown))  # fmt: skip

    def assign(self, name: str, values: list[str], unknown: bool, append: bool = False) -> None:
        """Add candidate ``values`` for ``name`` (earlier candidates stay: paths may differ)."""
        current = self.scalars.setdefault(name, [])
        if append and current:
            values = [c + v for c in current for v in values]
            current.clear()
        for v in values:
            if v not in current:
                current.append(v)
        if unknown or len(current) > MAX_CANDIDATES:
            self.unknown.add(name)
            del current[MAX_CANDIDATES:]

    def assign_array(self, name: str, items: list[str], unknown: bool) -> None:
        """Add a candidate value for array ``name``."""
        self.arrays.setdefault(name, []).append(items)
        self.assign(name, items[:1], unknown)

    def lookup(self, name: str) -> tuple[list[str], bool]:
        """Candidate values of ``name`` and whether its value may be something else."""
        if name in self.scalars:
            return self.scalars[name], name in self.unknown
        if self.env is not None and name in self.env:
            return [self.env[name]], False
        if name == "PWD" and self.cwd:
            return [self.cwd], False
        if name == "IFS":
            return [" \t\n"], False
        return [], True

    def ifs(self) -> str:
        """Characters any candidate IFS splits on (their union)."""
        values, _ = self.lookup("IFS")
        return "".join(sorted(set("".join(values)))) or " \t\n"


def brace_expand(text: str, limit: int = 64) -> list[str]:
    """``a{b,c}d`` -> ``[abd, acd]`` and ``{1..3}``; at most ``limit`` results."""
    m = _BRACE_RE.search(text)
    if m is None:
        return [text]
    body = m.group(1)
    seq = _SEQ_RE.match(body)
    if seq:
        a, b = seq.group(1), seq.group(2)
        if a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
            lo, hi = int(a), int(b)
            step = 1 if hi >= lo else -1
            parts = [str(i) for i in range(lo, hi + step, step)][:limit]
        else:
            parts = [chr(c) for c in range(ord(a), ord(b) + 1)][:limit]
    elif "," in body:
        parts = body.split(",")
    else:
        head = text[: m.end()]
        return [head + rest for rest in brace_expand(text[m.end() :], limit)][:limit]
    out: list[str] = []
    for p in parts:
        for tail in brace_expand(text[: m.start()] + p + text[m.end() :], limit):
            out.append(tail)
            if len(out) >= limit:
                return out
    return out


def _unquoted_braces(raw: str) -> bool:
    """True when ``raw`` holds a ``{`` outside quotes (bash would brace-expand it)."""
    quote = ""
    for c in raw:
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == "{":
            return True
    return False


class _Expander:
    """Expands the ``$`` constructs of one text (see :func:`expand_words`)."""

    def __init__(self, vars: Vars, sub_value: SubValue, depth: int = 0) -> None:
        self.vars = vars
        self.sub_value = sub_value
        self.depth = depth

    def text(self, text: str) -> tuple[list[str], int]:
        """Candidate expansions of ``text`` and what stayed unknown (0, 1 or 2, see Word)."""
        if "$" not in text and "`" not in text:
            return [text], 0
        pieces: list[list[str]] = []
        unknown = 0
        lex = Lexer(text)
        i, n, start = 0, len(text), 0
        while i < n:
            c = text[i]
            if c == "\\":
                i += 2
                continue
            if c not in "$`":
                i += 1
                continue
            end, values, unk = self._dollar(lex, text, i)
            if end == i:
                i += 1
                continue
            pieces.append([text[start:i]])
            pieces.append(values)
            unknown = max(unknown, unk)
            i = start = end
        pieces.append([text[start:]])
        out: list[str] = []
        for combo in itertools.product(*pieces):
            out.append("".join(combo))
            if len(out) >= MAX_CANDIDATES:
                unknown = _VAR
                break
        return out, unknown

    def _dollar(self, lex: Lexer, text: str, i: int) -> tuple[int, list[str], int]:
        """Expansion at ``text[i]``: (end index, candidates, unknown)."""
        if text[i] == "`":
            end = lex._skip_backtick(i + 1)
            return end, *self._substitution(text[i + 1 : max(i + 1, end - 1)], text[i:end])
        if text.startswith("$((", i):
            end = lex._skip_paren(i + 2)
            return end, ["1"], 0
        if text.startswith("$(", i):
            end = lex._skip_paren(i + 2)
            return end, *self._substitution(text[i + 2 : max(i + 2, end - 1)], text[i:end])
        if text.startswith("${", i):
            end = lex._skip_brace(i + 2)
            return end, *self._param(text[i + 2 : max(i + 2, end - 1)], text[i:end])
        m = _SIMPLE_RE.match(text, i + 1)
        if m is None:
            return i, [], 0
        name = m.group(0)
        return m.end(), *self._param(name, text[i : m.end()])

    def _substitution(self, script: str, source: str) -> tuple[list[str], int]:
        value = self.sub_value(script, self.vars) if self.depth < 4 else None
        if value is None:
            return [source], _SUB
        return [value.rstrip("\n")], 0

    def _param(self, expr: str, source: str) -> tuple[list[str], int]:
        m = _PARAM_RE.match(expr)
        if m is None:
            return [source], _VAR
        name, idx, op = m.group("name"), m.group("idx"), m.group("op")
        if m.group("len"):
            return ["0"], 0
        in_env = self.vars.env is not None and name in self.vars.env
        followed = name == "PWD" and bool(self.vars.cwd)
        if name in _INERT and not op and not m.group("ind") and not in_env and not followed:
            return [source], 0
        values, unknown = self._value(name, idx)
        if m.group("ind"):
            resolved: list[str] = []
            for v in values:
                vv, u = self._value(v, None) if _SIMPLE_RE.fullmatch(v) else ([], True)
                resolved.extend(vv)
                unknown = unknown or u
            values = resolved
        if name == "HOME" and unknown and op:
            values, unknown = [_PLACEHOLDER_HOME], False
        out, unk = apply_operator(values, not unknown, op, self._word)
        if unk and not out:
            return [source], _VAR
        return out[:MAX_CANDIDATES], _VAR if unk else 0

    def _value(self, name: str, idx: str | None) -> tuple[list[str], bool]:
        v = self.vars
        if name in ("@", "*") or (idx in ("[@]", "[*]") and name in v.arrays):
            lists = v.positional if name in ("@", "*") else v.arrays[name]
            if not lists:
                return [], True
            sep = _FIELD_SEP if (name == "@" or idx == "[@]") else " "
            return [sep.join(items) for items in lists], False
        if name.isdigit() and name != "0":
            k = int(name)
            vals = [items[k - 1] for items in v.positional if len(items) >= k]
            return vals, not vals
        if name in _SPECIAL_VALUES:
            return [_SPECIAL_VALUES[name]], False
        if idx and name in v.arrays:
            key = idx[1:-1]
            if key.isdigit():
                vals = [items[int(key)] for items in v.arrays[name] if len(items) > int(key)]
                return vals, not vals
            return [], True
        return v.lookup(name)

    def _word(self, word: str) -> tuple[list[str], bool]:
        if self.depth >= 4:
            return [word], "$" in word
        values, kind = _Expander(self.vars, self.sub_value, self.depth + 1).text(word)
        return values, bool(kind)


def _fields(text: str, split: bool, ifs: str) -> list[str]:
    """Fields of an expanded text: array separators always split; IFS when unquoted."""
    parts = text.split(_FIELD_SEP)
    if not split:
        return parts
    out: list[str] = []
    for p in parts:
        out.extend(f for f in re.split("[" + re.escape(ifs) + "]+", p) if f)
    return out


def _expand_word(w: Word, vars: Vars, sub_value: SubValue) -> list[list[Word]]:
    """Alternatives for one word, each a list of resulting words."""
    texts = brace_expand(w.text) if _unquoted_braces(w.raw) and "{" in w.text else [w.text]
    if not w.expands:
        fields = [Word(t, w.raw, w.quoted, w.subs if k == 0 else []) for k, t in enumerate(texts)]
        return [fields]
    exp = _Expander(vars, sub_value)
    ifs = vars.ifs()
    alternatives: list[list[Word]] = []
    for t in texts:
        candidates, unknown = exp.text(t)
        for cand in candidates:
            parts = _fields(cand, w.bare_dollar, ifs)
            alternatives.append([
                Word(f, w.raw, w.quoted, w.subs if k == 0 else [], w.bare_dollar,
                     w.quoted_dollar, unknown)
                for k, f in enumerate(parts)
            ])  # fmt: skip
    return alternatives[:MAX_VARIANTS] or [[]]


def expand_words(
    words: list[Word], vars: Vars, sub_value: SubValue, *, drop_empty: bool = True
) -> tuple[list[list[Word]], bool]:
    """Argument-vector variants of ``words``; True when variants were dropped at the cap.

    A leading word that is nothing but an unknown expansion may also be empty,
    so a variant without it is included (``$X rm -rf /`` can run ``rm``).
    """
    per_word = [_expand_word(w, vars, sub_value) for w in words]
    variants: list[list[Word]] = []
    capped = False
    for combo in itertools.product(*per_word):
        variants.append([w for alt in combo for w in alt])
        if len(variants) >= MAX_VARIANTS:
            capped = True
            break
    first = per_word[0] if per_word else []
    if (
        drop_empty
        and len(words) > 1
        and all(w.unknown for alt in first for w in alt)
        and _SOLE_EXPANSION_RE.match(words[0].raw)
    ):
        rest, rest_capped = expand_words(words[1:], vars, sub_value, drop_empty=False)
        variants.extend(rest[:2])
        capped = capped or rest_capped
    return variants, capped


_SOLE_EXPANSION_RE = re.compile(r'^"?\$(?:\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*|[0-9@*])"?$')


def expand_assignment(
    word: Word, vars: Vars, sub_value: SubValue
) -> tuple[str, list[str], list[str] | None, bool, bool] | None:
    """``NAME=value`` -> ``(name, candidates, array items or None, unknown, append)``."""
    name, eq, value = word.text.partition("=")
    if not eq:
        return None
    append = name.endswith("+")
    name = name.rstrip("+")
    if "[" in name:
        name = name.split("[", 1)[0]
    if not name.isidentifier():
        return None
    exp = _Expander(vars, sub_value)
    if value.startswith("(") and value.endswith(")"):
        lex = Lexer(value[1:-1], max_items=256)
        lex.run()
        items: list[str] = []
        unknown = False
        for item_kind, item in lex.items:
            if item_kind == "word" and isinstance(item, Word):
                alts = _expand_word(item, vars, sub_value)
                items.extend(w.text for w in alts[0])
                unknown = unknown or any(w.unknown == _VAR for w in alts[0])
        return name, items[:1], items, unknown, append
    if not word.expands:
        return name, [value], None, False, append
    candidates, kind = exp.text(value)
    return name, candidates, None, bool(kind), append
