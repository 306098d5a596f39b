"""Static evaluation of what simple pipelines print.

Contract: :func:`pipeline_output` returns the bytes-as-text a pipeline of
already expanded commands writes to stdout when it is fully determined by its
literals: a head of ``echo``, ``printf`` or ``cat`` with a here-document /
here-string, followed by filters the detector can replay (``base64 -d``,
``base32 -d``, ``xxd -r -p``, ``rev``, ``tr``, ``sed s/x/y/``, ``gzip -d``,
``cat``). Anything else gives None. Output is capped at :data:`MAX_OUTPUT`
bytes; never raises.

This is how ``echo cm0gLXJmIC8= | base64 -d | sh`` and
``$(printf '\\x72\\x6d') -rf /`` are seen for what they run.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib

from registry.approval.shell.args import has_long, operands, short_flags
from registry.approval.shell.escapes import printf_format, printf_unescape
from registry.approval.shell.resolve import Cmd

__all__ = ["MAX_OUTPUT", "echo_output", "pipeline_output"]

MAX_OUTPUT = 65536
_ECHO_OPTS = frozenset({"-e", "-n", "-E", "-ne", "-en", "-nE", "-En"})
_TR_CLASSES = {
    "[:lower:]": "abcdefghijklmnopqrstuvwxyz",
    "[:upper:]": "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "[:digit:]": "0123456789",
    "[:space:]": " \t\n\r\f\v",
    "[:alpha:]": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
}
_SED_SUBST_RE = re.compile(r"^s(.)(.*?)(?<!\\)\1(.*?)(?<!\\)\1([gI]*)$", re.DOTALL)


def echo_output(cmd: Cmd) -> str | None:
    """What ``echo``/``printf``/``cat`` (from a here-document or here-string) print, if static."""
    if any(cmd.unknown):
        return None
    if cmd.name == "echo":
        args = list(cmd.args)
        escapes = False
        while args and args[0] in _ECHO_OPTS:
            escapes = escapes or "e" in args[0]
            args.pop(0)
        text = " ".join(args)
        return printf_unescape(text) if escapes else text
    if cmd.name == "printf":
        return printf_format([a for a in cmd.args if a != "--"])
    if cmd.name == "cat" and not operands(cmd.args):
        bodies = [r.body for r in cmd.redirects if r.body is not None]
        return "\n".join(bodies) if bodies else None
    return None


def _b64(data: bytes, alphabet32: bool = False) -> bytes | None:
    compact = b"".join(data.split())
    try:
        if alphabet32:
            return base64.b32decode(compact + b"=" * (-len(compact) % 8), casefold=True)
        return base64.b64decode(compact + b"=" * (-len(compact) % 4), validate=False)
    except (binascii.Error, ValueError):
        return None


def _tr_set(spec: str) -> str | None:
    spec = printf_unescape(spec)
    for cls, chars in _TR_CLASSES.items():
        spec = spec.replace(cls, chars)
    out: list[str] = []
    i = 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            lo, hi = ord(spec[i]), ord(spec[i + 2])
            if hi < lo or hi - lo > 4096:
                return None
            out.extend(chr(c) for c in range(lo, hi + 1))
            i += 3
        else:
            out.append(spec[i])
            i += 1
    return "".join(out)


def _tr(cmd: Cmd, text: str) -> str | None:
    flags = short_flags(cmd.args)
    ops = operands(cmd.args)
    if flags - {"d"} or not ops:
        return None
    first = _tr_set(ops[0])
    if first is None:
        return None
    if "d" in flags:
        return text.translate({ord(c): None for c in first})
    if len(ops) < 2:
        return None
    second = _tr_set(ops[1])
    if not second:
        return None
    second = second + second[-1] * max(0, len(first) - len(second))
    return text.translate({ord(a): b for a, b in zip(first, second, strict=False)})


def _sed(cmd: Cmd, text: str) -> str | None:
    ops = [a for a in cmd.args if a not in ("-e", "--expression")]
    if len(ops) != 1 or ops[0].startswith("-"):
        return None
    m = _SED_SUBST_RE.match(ops[0])
    if not m:
        return None
    try:
        rx = re.compile(m.group(2), re.IGNORECASE if "I" in m.group(4) else 0)
        repl = re.sub(r"\\(\d)", r"\\g<\1>", m.group(3)).replace("&", r"\g<0>")
        count = 0 if "g" in m.group(4) else 1
        return "\n".join(rx.sub(repl, line, count=count) for line in text.split("\n"))
    except (re.error, IndexError):
        return None


def _gunzip(data: bytes) -> bytes | None:
    try:
        out = zlib.decompressobj(wbits=47).decompress(data, MAX_OUTPUT)
    except zlib.error:
        return None
    return out


def _filter(cmd: Cmd, data: bytes) -> bytes | None:
    """``data`` after passing through ``cmd``, or None when ``cmd`` cannot be replayed."""
    name, args = cmd.name, cmd.args
    if any(cmd.unknown) or (operands(args) and name not in ("tr", "sed", "openssl")):
        return None
    decode = bool({"d", "D"} & short_flags(args)) or has_long(args, "decode")
    text = data.decode("utf-8", errors="ignore")
    if name in ("cat", "tee") and not args:
        return data
    if name == "base64":
        return _b64(data) if decode else base64.b64encode(data)
    if name == "base32":
        return _b64(data, alphabet32=True) if decode else None
    if name == "openssl" and "base64" in args and "-d" in args:
        return _b64(data)
    if name == "xxd" and "r" in short_flags(args) and "p" in short_flags(args):
        try:
            return binascii.unhexlify(re.sub(r"[^0-9a-fA-F]", "", text)[: 2 * MAX_OUTPUT])
        except (binascii.Error, ValueError):
            return None
    if name == "rev":
        return "\n".join(line[::-1] for line in text.split("\n")).encode()
    if name in ("gunzip", "zcat") or (name == "gzip" and decode):
        return _gunzip(data)
    if name == "tr":
        out = _tr(cmd, text)
        return out.encode() if out is not None else None
    if name == "sed":
        out = _sed(cmd, text)
        return out.encode() if out is not None else None
    return None


def pipeline_output(cmds: list[Cmd]) -> str | None:
    """What ``cmds`` (one pipeline, in order) print, when fully static (module docstring)."""
    if not cmds:
        return None
    head = echo_output(cmds[0])
    if head is None:
        return None
    data: bytes | None = head.encode("utf-8", errors="ignore")
    for cmd in cmds[1:]:
        if data is None or len(data) > MAX_OUTPUT:
            return None
        data = _filter(cmd, data)
    if data is None or len(data) > MAX_OUTPUT:
        return None
    return data.decode("utf-8", errors="ignore")
