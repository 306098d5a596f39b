"""Dangerous patterns about running code or deleting indirectly.

Remote content piped or substituted into a shell, decoded content piped or
substituted into a shell, ``xargs rm``, ``find -exec rm`` and ``find -delete``.
Same contract as :mod:`registry.approval.patterns`; also exposes the helpers
that :mod:`registry.approval.nested` uses to find the commands ``xargs`` and
``find -exec`` run.
"""

from __future__ import annotations

import re
from functools import lru_cache

from registry.approval.commands import (
    DECODERS,
    FETCHERS,
    INTERPRETERS,
    SHELLS,
    Cmd,
    Pattern,
    has_long,
    resolve,
    resolve_argv,
    short_flags,
)
from registry.approval.dataflow import inline_code, reads_script_from_stdin
from registry.approval.shell import parse_script

__all__ = [
    "EXEC_PATTERNS",
    "find_exec_commands",
    "resolve_names",
    "substitution_kinds",
    "xargs_command",
]

_CODE_DECODE_EXEC_RE = re.compile(
    r"\b(?:exec|eval)\s*\(.*(?:b64decode|decodebytes|atob|Buffer\.from|unhexlify|fromhex|decode_base64|unpack)",
    re.IGNORECASE | re.DOTALL,
)
_CODE_REMOTE_EXEC_RE = re.compile(
    r"\b(?:exec|eval)\s*\(.*(?:urlopen|requests\.get|urllib|http\.get|fetch\(|open-uri|LWP::|get\()",
    re.IGNORECASE | re.DOTALL,
)


# -- remote / decoded code execution ---------------------------------------------
def _is_decoder(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if name not in DECODERS:
        return False
    if name in ("base64", "base32", "basenc"):
        return bool({"d", "D"} & short_flags(args)) or has_long(args, "decode")
    if name == "xxd":
        return "r" in short_flags(args)
    if name == "openssl":
        return "-d" in args or "-decrypt" in args
    if name == "xz":
        return "d" in short_flags(args) or has_long(args, "decompress")
    if name == "certutil":
        return any(a.lower() in ("-decode", "-decodehex", "/decode") for a in args)
    return True


_MAX_KIND_DEPTH = 4


def _cmd_kinds(cmd: Cmd, depth: int = 0) -> set[str]:
    kinds: set[str] = set()
    if cmd.name in FETCHERS or (cmd.name in ("gzip", "bzip2") and "d" in short_flags(cmd.args)):
        kinds.add("remote" if cmd.name in FETCHERS else "decoded")
    elif _is_decoder(cmd):
        kinds.add("decoded")
    for word_subs in cmd.subs:
        for sub in word_subs:
            kinds |= substitution_kinds(sub, depth + 1)
    return kinds


@lru_cache(maxsize=256)
def substitution_kinds(script: str, depth: int = 0) -> frozenset[str]:
    """Subset of ``{"remote", "decoded"}``: does ``script``'s output come from a fetch/decoder.

    Looks ``_MAX_KIND_DEPTH`` substitutions deep; deeper nesting is flagged by the
    detector's own depth limit instead.
    """
    if depth > _MAX_KIND_DEPTH:
        return frozenset()
    kinds: set[str] = set()
    parsed = parse_script(script)
    for pipeline in parsed.pipelines:
        for sc in pipeline:
            cmd = resolve(sc.words, sc.redirects)
            if cmd is not None:
                kinds |= _cmd_kinds(cmd, depth)
    return frozenset(kinds)


def _upstream_kinds(cmd: Cmd) -> set[str]:
    kinds: set[str] = set()
    for prev in cmd.piped_from():
        kinds |= _cmd_kinds(prev)
    return kinds


_EXEC_NAMES = (
    SHELLS
    | INTERPRETERS
    | frozenset({"eval", "source", ".", "iex", "invoke-expression", "powershell", "pwsh", "exec"})
)


def _substituted_kinds(cmd: Cmd) -> set[str]:
    """Kinds of substitutions whose output becomes code: argv[0] itself, or args of a shell/eval."""
    kinds: set[str] = set()
    if not cmd.subs:
        return kinds
    for sub in cmd.subs[0]:
        kinds |= substitution_kinds(sub)
    if cmd.name in _EXEC_NAMES or cmd.name.startswith("python"):
        for word_subs in cmd.subs[1:]:
            for sub in word_subs:
                kinds |= substitution_kinds(sub)
    return kinds


def _remote_code_exec(cmd: Cmd) -> bool:
    if reads_script_from_stdin(cmd) and "remote" in _upstream_kinds(cmd):
        return True
    code = inline_code(cmd)
    if code is not None and _CODE_REMOTE_EXEC_RE.search(code):
        return True
    return "remote" in _substituted_kinds(cmd)


def _decoded_code_exec(cmd: Cmd) -> bool:
    if reads_script_from_stdin(cmd) and "decoded" in _upstream_kinds(cmd):
        return True
    code = inline_code(cmd)
    if code is not None and _CODE_DECODE_EXEC_RE.search(code):
        return True
    return "decoded" in _substituted_kinds(cmd)


# -- xargs / find ------------------------------------------------------------------
_XARGS_ARG_OPTS = frozenset("ILnPsEdaeil")


def xargs_command(cmd: Cmd) -> list[str]:
    """The command ``xargs`` runs (``xargs -0 rm -f`` -> ``['rm', '-f']``)."""
    args = cmd.args
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        a = args[i]
        if a == "--":
            i += 1
            break
        i += 2 if (len(a) == 2 and a[1] in _XARGS_ARG_OPTS) else 1
    return args[i:] or ["echo"]


def find_exec_commands(cmd: Cmd) -> list[list[str]]:
    """Commands run by ``find -exec/-execdir/-ok/-okdir ... ;|+``."""
    out: list[list[str]] = []
    args = cmd.args
    i = 0
    while i < len(args):
        if args[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(args) and args[j] not in (";", "+", "\\;"):
                j += 1
            if j > i + 1:
                out.append(args[i + 1 : j])
            i = j
        i += 1
    return out


_RM_NAMES = frozenset({"rm", "shred", "unlink", "rmdir"})


def _xargs_rm(cmd: Cmd) -> bool:
    if cmd.name != "xargs":
        return False
    inner = resolve_names(xargs_command(cmd))
    return inner in _RM_NAMES


def resolve_names(argv: list[str]) -> str:
    """Effective program name of ``argv`` after wrapper stripping (``sudo rm`` -> ``rm``)."""
    inner = resolve_argv(argv)
    return inner.name if inner is not None else ""


def _find_delete(cmd: Cmd) -> bool:
    return cmd.name == "find" and "-delete" in cmd.args


def _find_exec_rm(cmd: Cmd) -> bool:
    return cmd.name == "find" and any(
        resolve_names(c) in _RM_NAMES for c in find_exec_commands(cmd)
    )


EXEC_PATTERNS: list[Pattern] = [
    Pattern(
        "remote_code_exec",
        _remote_code_exec,
        "run remote content in a shell (curl | sh, bash <(curl ...))",
    ),
    Pattern(
        "decoded_code_exec", _decoded_code_exec, "run decoded content in a shell (base64 -d | sh)"
    ),
    Pattern("xargs_rm", _xargs_rm, "delete files listed on stdin (xargs rm)"),
    Pattern("find_exec_rm", _find_exec_rm, "delete files found by find (-exec rm)"),
    Pattern("find_delete", _find_delete, "delete files found by find (-delete)"),
]
