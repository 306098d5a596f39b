"""Argument helpers shared by the shell model and the rules.

Contract: pure functions over argument texts (after quote removal). Option
parsing follows GNU conventions approximately: single-dash clusters
(``-rf``), long options with ``=``, ``--`` ending options; answers err toward
exposing what a command does rather than hiding it.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

__all__ = [
    "has_long",
    "join_argv",
    "long_flags",
    "operands",
    "option_value",
    "shell_c_script",
    "short_flags",
    "subcommand",
    "word_set",
]


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` (compact spelling of long name sets)."""
    return frozenset(text.split())


def short_flags(args: Iterable[str]) -> set[str]:
    """Characters of single-dash option clusters (``-rf`` -> ``{'r','f'}``) before ``--``."""
    out: set[str] = set()
    for a in args:
        if a == "--":
            break
        if len(a) > 1 and a[0] == "-" and a[1] != "-":
            out.update(a[1:])
    return out


def long_flags(args: Iterable[str]) -> set[str]:
    """Names of ``--long`` options before ``--`` (``--force=x`` -> ``force``)."""
    out: set[str] = set()
    for a in args:
        if a == "--":
            break
        if a.startswith("--") and len(a) > 2:
            out.add(a[2:].split("=", 1)[0].lower())
    return out


def has_long(args: Iterable[str], name: str, min_len: int = 3) -> bool:
    """True if a ``--opt`` in ``args`` is ``name`` or an unambiguous GNU abbreviation of it."""
    return any(len(f) >= min_len and name.startswith(f) for f in long_flags(args))


def operands(args: Iterable[str], arg_opts: frozenset[str] = frozenset()) -> list[str]:
    """Non-option arguments; options in ``arg_opts`` (short letters) consume the next word."""
    out: list[str] = []
    it = iter(args)
    for a in it:
        if a == "--":
            out.extend(it)
            break
        if len(a) > 1 and a[0] == "-":
            if a[1] != "-" and a[-1] in arg_opts:
                next(it, None)
            continue
        out.append(a)
    return out


def option_value(args: list[str], *names: str) -> str | None:
    """Value of the first option in ``names``: ``-o F``, ``-oF``, ``--output F``, ``--output=F``."""
    for i, a in enumerate(args):
        if a == "--":
            return None
        for name in names:
            if a == name:
                return args[i + 1] if i + 1 < len(args) else None
            if name.startswith("--") and a.startswith(name + "="):
                return a[len(name) + 1 :]
            if len(name) == 2 and not name.startswith("--") and a.startswith(name) and len(a) > 2:
                return a[2:]
            if (
                len(name) == 2
                and a[:1] == "-"
                and a[1:2] != "-"
                and a.endswith(name[1])
                and a[1:].isalpha()
            ):
                return args[i + 1] if i + 1 < len(args) else None  # "-fsSLo FILE"
    return None


def subcommand(
    args: list[str],
    short_arg_opts: frozenset[str] = frozenset(),
    long_arg_opts: frozenset[str] = frozenset(),
) -> tuple[int, str]:
    """Index and lower-cased text of the first operand (the verb) in ``args``.

    Options in ``short_arg_opts`` (letters) / ``long_arg_opts`` (names without
    dashes, written without ``=``) consume the next word. ``(-1, "")`` if none.
    """
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return (i + 1, args[i + 1].lower()) if i + 1 < len(args) else (-1, "")
        if a.startswith("--") and len(a) > 2:
            i += 2 if ("=" not in a and a[2:].lower() in long_arg_opts) else 1
            continue
        if a.startswith("-") and len(a) > 1:
            i += 2 if (len(a) == 2 and a[1] in short_arg_opts) else 1
            continue
        return i, a.lower()
    return -1, ""


def join_argv(argv: Iterable[str]) -> str:
    """Quote ``argv`` back into one shell command string for re-analysis."""
    return " ".join(shlex.quote(a) for a in argv)


def shell_c_script(args: list[str]) -> str | None:
    """The ``-c`` script of a shell invocation, if any (``bash -lc 'x'`` -> ``x``)."""
    saw_c = False
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
            continue
        if a == "--":
            i += 1
            break
        if len(a) > 1 and a[0] in "-+" and not a.startswith("--"):
            if "c" in a[1:]:
                saw_c = True
            i += 1
            continue
        if a.startswith("--"):
            i += 1
            continue
        break
    if saw_c and i < len(args):
        return args[i]
    return None
