"""Escape decoding: ``$'...'`` (ANSI-C quoting) and ``printf``/``echo -e`` escapes.

Contract: pure functions that never raise for any input; used by the lexer
and by static evaluation of ``echo``/``printf`` output, because both are easy
ways to spell a command name without its letters (``$'\\x72\\x6d'`` is ``rm``).
"""

from __future__ import annotations

import re

__all__ = ["decode_ansi_c", "printf_format", "printf_unescape"]

_C_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "e": "\x1b",
    "E": "\x1b",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_NUMERIC_RE = re.compile(
    r"x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})"
)
_PRINTF_ESCAPE_RE = re.compile(r"\\(?:x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|[0-7]{1,4}|.)", re.DOTALL)
_FORMAT_RE = re.compile(r"%(?:%|[-+ #0]*\d*(?:\.\d+)?([sbcdiuxXoqfeEgG]))")


def decode_ansi_c(s: str, j: int) -> tuple[str, int, bool]:
    """Decode the body of ``$'...'`` starting at ``j`` (after the opening quote).

    Returns ``(text, index after the closing quote, closed)``.
    """
    n = len(s)
    out: list[str] = []
    while j < n:
        c = s[j]
        if c == "'":
            return "".join(out), j + 1, True
        if c == "\\" and j + 1 < n:
            e = s[j + 1]
            if e in _C_ESCAPES:
                out.append(_C_ESCAPES[e])
                j += 2
                continue
            m = _NUMERIC_RE.match(s, j + 1, min(n, j + 10))
            if m:
                digits = m.group(1) or m.group(2) or m.group(3)
                code = int(digits, 16) if digits else int(m.group(4), 8)
                out.append(chr(code) if code < 0x110000 else "")
                j = m.end()
                continue
            out.append(e)
            j += 2
            continue
        out.append(c)
        j += 1
    return "".join(out), n, False


def printf_unescape(text: str) -> str:
    """Decode the escapes ``printf``/``echo -e`` understand (``\\x72`` -> ``r``)."""
    if "\\" not in text:
        return text

    def sub(m: re.Match[str]) -> str:
        g = m.group(0)
        if g[1] in "xu":
            return chr(int(g[2:], 16))
        if g[1] in "01234567":
            return chr(int(g[1:].lstrip("0") or "0", 8) % 0x110000)
        return {"n": "\n", "t": "\t", "\\": "\\", "r": "\n", "c": ""}.get(g[1], g[1])

    return _PRINTF_ESCAPE_RE.sub(sub, text)


def printf_format(args: list[str]) -> str:
    """Output of ``printf FORMAT ARGS...`` for the common conversions.

    ``%s``/``%b``/``%c``/``%d``... consume arguments in turn (the format is
    reused while arguments remain, as bash does); escapes are decoded.
    """
    if not args:
        return ""
    fmt, rest = args[0], list(args[1:])
    if "%" not in fmt:
        return printf_unescape(fmt)
    out: list[str] = []
    # Bounded: each round consumes at least one argument or is the last.
    for _ in range(len(rest) + 1):

        def conv(m: re.Match[str]) -> str:
            kind = m.group(1)
            if kind is None:
                return "%"
            value = rest.pop(0) if rest else ""
            if kind == "c":
                return value[:1]
            if kind == "b":
                return printf_unescape(value)
            return value

        consumed_before = len(rest)
        out.append(printf_unescape(_FORMAT_RE.sub(conv, fmt)))
        if not rest or len(rest) == consumed_before:
            break
    return "".join(out)
