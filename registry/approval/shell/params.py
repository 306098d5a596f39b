"""Parameter expansion operators: ``${name:-word}``, ``${name%pat}``, ``${name/a/b}``...

Contract: :func:`apply_operator` applies the operator text that follows a
parameter name to each candidate value, the way bash does, and reports
whether the result still depends on something unknown. Shell patterns are
translated to regular expressions (``*``, ``?``, ``[...]``). Values longer
than :data:`MAX_VALUE` are not pattern-matched (the result is unknown), which
keeps the cost of an operator small whatever the pattern. Never raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["MAX_VALUE", "apply_operator", "glob_to_regex"]

MAX_VALUE = 256
# word -> (candidates, unknown): expands the word part of an operator (${x:-$y}).
ExpandWord = Callable[[str], tuple[list[str], bool]]

_SUBSTRING_RE = re.compile(r"^:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?$")
_DEFAULT_OPS = (":-", ":=", ":+", ":?", "-", "=", "+", "?")


def glob_to_regex(pattern: str) -> str:
    """Regular expression (no anchors) for a shell pattern."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _strip(value: str, pattern: str, suffix: bool, longest: bool) -> str:
    try:
        rx = re.compile(glob_to_regex(pattern), re.DOTALL)
    except re.error:
        return value
    n = len(value)
    cuts = range(n + 1) if (suffix == longest) else range(n, -1, -1)
    for cut in cuts:
        part = value[cut:] if suffix else value[:cut]
        if rx.fullmatch(part):
            return value[:cut] if suffix else value[cut:]
    return value


def _replace(value: str, op: str) -> str:
    mode, body = op[1:2], op[1:]
    if mode in ("/", "#", "%"):
        body = op[2:]
    pattern, _, repl = body.partition("/")
    try:
        rx = glob_to_regex(pattern)
        if mode == "#":
            return re.sub("^" + rx, repl.replace("\\", "\\\\"), value, count=1, flags=re.DOTALL)
        if mode == "%":
            return re.sub(rx + "$", repl.replace("\\", "\\\\"), value, count=1, flags=re.DOTALL)
        return re.sub(rx, repl.replace("\\", "\\\\"), value, count=0 if mode == "/" else 1,
                      flags=re.DOTALL)  # fmt: skip
    except re.error:
        return value


def _case(value: str, op: str) -> str:
    if op == "^^":
        return value.upper()
    if op == ",,":
        return value.lower()
    if op == "^":
        return value[:1].upper() + value[1:]
    return value[:1].lower() + value[1:]


def _substring(value: str, m: re.Match[str]) -> str:
    off = int(m.group(1))
    start = max(0, len(value) + off) if off < 0 else off
    if m.group(2) is None:
        return value[start:]
    length = int(m.group(2))
    end = len(value) + length if length < 0 else start + length
    return value[start:end]


def apply_operator(
    values: list[str], known: bool, op: str, expand: ExpandWord
) -> tuple[list[str], bool]:
    """Apply operator ``op`` (the text after the name) to candidate ``values``.

    ``known`` is False when the parameter's value is not statically known (then
    ``values`` holds the candidates seen so far, possibly none). Returns
    ``(candidates, unknown)``.
    """
    if not op:
        return values, not known
    for d in _DEFAULT_OPS:
        if op.startswith(d):
            word, word_unknown = expand(op[len(d) :])
            colon = d.startswith(":")
            kind = d[-1]
            if kind in "-=":
                if not known:
                    return word, True
                out = [w for v in values for w in ([v] if (v or not colon) else word)]
                return out, word_unknown and any(not v for v in values)
            if kind == "+":
                if not known:
                    return [*word, ""], True
                out = [w for v in values for w in (word if (v or not colon) else [""])]
                return out, word_unknown
            return values, not known  # ":?" / "?": the value or an error
    if not known or any(len(v) > MAX_VALUE for v in values):
        return values, True
    if op[:2] in ("%%", "##") or op[:1] in ("%", "#"):
        longest = op[:2] in ("%%", "##")
        pattern, unknown = expand(op[2:] if longest else op[1:])
        out = [_strip(v, p, op[0] == "%", longest) for v in values for p in pattern]
        return out, unknown
    if op.startswith("/"):
        return [_replace(v, op) for v in values], False
    if op in ("^^", ",,", "^", ","):
        return [_case(v, op) for v in values], False
    if op in ("@U", "@L", "@u"):
        return [_case(v, {"@U": "^^", "@L": ",,", "@u": "^"}[op]) for v in values], False
    if op in ("@Q", "@P", "@A", "@a", "@K"):
        return values, False
    m = _SUBSTRING_RE.match(op)
    if m:
        return [_substring(v, m) for v in values], False
    return values, True
