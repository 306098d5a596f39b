"""From parsed simple commands to the effective command that will run.

Contract: :func:`resolve` takes the words of one simple command and returns a
:class:`Cmd` whose ``argv`` starts at the program that actually runs, with
wrapper prefixes removed (``sudo``, ``env``, ``nohup``, ``timeout 5``,
``nice -n 5``, ``command``, ``exec``, ``busybox``, shell reserved words such as
``then``/``do``/``!``/``{``), plus the nested scripts that the wrappers carry
(``su -c '...'``, ``env -S '...'``, ``watch '...'``, ``flock f -c '...'``).
Option parsing is approximate but errs toward exposing the inner command.

Also: argument helpers shared by the matchers, and the command-name sets
(shells, interpreters, fetchers, decoders, data commands).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from registry.approval.shell import Redirect, Word

__all__ = [
    "DATA_COMMANDS",
    "DECODERS",
    "FETCHERS",
    "INTERPRETERS",
    "SHELLS",
    "Cmd",
    "Pattern",
    "basename",
    "has_long",
    "join_argv",
    "long_flags",
    "operands",
    "resolve",
    "resolve_argv",
    "shell_c_script",
    "short_flags",
    "subcommand",
]


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` (compact spelling of long name sets)."""
    return frozenset(text.split())


SHELLS = word_set(
    """
    sh bash zsh dash ksh mksh ash fish csh tcsh yash rbash
    """
)
INTERPRETERS = word_set(
    """
    python python2 python3 pypy pypy3 perl ruby node nodejs bun deno php lua rscript osascript
    tclsh jshell
    """
)
FETCHERS = word_set(
    """
    curl wget fetch http https xh aria2c lwp-request get lynx invoke-webrequest iwr
    invoke-restmethod irm curlie httpie ftp tftp
    """
)
DECODERS = word_set(
    """
    base64 base32 basenc xxd openssl tr rev uudecode gunzip zcat bunzip2 xz unxz certutil
    """
)
# Programs whose arguments are text, patterns or names, never a command to run.
DATA_COMMANDS = word_set(
    """
    echo printf grep egrep fgrep rg ag ack zgrep git man info help whatis apropos which type
    whereis cat less more head tail wc ls file stat sort uniq cut diff cmp comm jq yq history
    printenv basename dirname realpath readlink test [ [[ true false : sleep date pwd column fmt
    fold nl tac strings hexdump od md5sum sha1sum sha256sum sha512sum cowsay figlet logger
    notify-send read tldr look expr let tree du df touch mkdir sed awk
    """
)
_WRAPPERS_NO_ARGS = word_set(
    """
    nohup builtin setsid unbuffer caffeinate then do else elif if while until ! { coproc noglob
    nocorrect proxychains proxychains4 tsocks torsocks catchsegv fakeroot
    """
)
# Wrappers taking options, with the short options that consume the next word.
_WRAPPERS_WITH_OPTS: dict[str, frozenset[str]] = {
    "time": frozenset("fo"),
    "strace": frozenset("eoOpPsSuEXIab"),
    "ltrace": frozenset("eoOpPsSuEnAaDl"),
    "valgrind": frozenset(),
    "nice": frozenset("n"),
    "stdbuf": frozenset("ioe"),
    "ionice": frozenset("cnpPu"),
    "cpulimit": frozenset("lpe"),
    "prlimit": frozenset("p"),
    "systemd-run": frozenset("pEu"),
}
_SKIP_SEGMENT = frozenset({"for", "case", "select", "function", "}", "fi", "done", "esac", "in"})
_SUDO_ARG_OPTS = frozenset("ugCDhprtUTR")
_ENV_ARG_OPTS = frozenset("uCP")
_WIN_EXT_RE = re.compile(r"\.(exe|cmd|bat|com)$", re.IGNORECASE)
_WIN_PATH_RE = re.compile(r"^[A-Za-z]:\\")
_NAME_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_DURATION_RE = re.compile(r"^\d+(\.\d+)?[smhd]?$")


@dataclass(slots=True)
class Cmd:
    """The effective command of one simple command.

    ``name`` is the lower-cased basename of the program (``/usr/bin/RM.exe`` ->
    ``rm``); ``argv`` the argument texts after quote removal; ``raw`` the
    matching source slices (for Windows paths whose backslashes the lexer
    removed); ``nested`` scripts the wrappers carry; ``pipeline``/``index`` place
    the command in its pipeline.
    """

    name: str
    argv: list[str]
    raw: list[str]
    redirects: list[Redirect] = field(default_factory=list)
    nested: list[str] = field(default_factory=list)
    wrappers: list[str] = field(default_factory=list)
    subs: list[list[str]] = field(default_factory=list)
    pipeline: list[Cmd] = field(default_factory=list)
    index: int = 0
    # Memo of inline_code(), which most matchers ask for: [] = not computed yet.
    code_memo: list[str | None] = field(default_factory=list)

    @property
    def args(self) -> list[str]:
        """Arguments after the program name."""
        return self.argv[1:]

    def piped_from(self) -> list[Cmd]:
        """Commands earlier in the same pipeline (their output reaches this stdin)."""
        return self.pipeline[: self.index]


def basename(word: str, raw: str | None = None) -> str:
    """Lower-cased program name of ``word`` without directory or Windows extension."""
    if raw and ":" in raw and _WIN_PATH_RE.match(raw.strip("'\"")):
        word = raw.strip("'\"").replace("\\", "/")
    name = word.rsplit("/", 1)[-1].lower()
    return _WIN_EXT_RE.sub("", name) if "." in name else name


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


class Pattern(NamedTuple):
    """A named matcher: ``key`` (stable, used in allowlists), ``match``, ``description``."""

    key: str
    match: Callable[[Cmd], bool]
    description: str


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


def _strip_wrapper(name: str, args: list[str], nested: list[str]) -> int | None:
    """How many leading words of ``args`` to drop after wrapper ``name``; None if not a wrapper."""
    if name in _WRAPPERS_NO_ARGS:
        return 0
    if name in ("sudo", "doas", "run0", "pkexec"):
        i = 0
        while i < len(args) and args[i].startswith("-"):
            a = args[i]
            if a == "--":
                return i + 1
            i += 2 if (len(a) == 2 and a[1] in _SUDO_ARG_OPTS) else 1
        return i
    if name == "env":
        i = 0
        while i < len(args):
            a = args[i]
            if a == "--":
                i += 1
                continue
            if a in ("-S", "--split-string") or a.startswith("--split-string="):
                script = (
                    a.split("=", 1)[1] if "=" in a else (args[i + 1] if i + 1 < len(args) else "")
                )
                nested.append(script)
                i += 1 if "=" in a else 2
                continue
            if a.startswith("-S") and len(a) > 2:
                nested.append(a[2:])
                i += 1
                continue
            if a.startswith("-"):
                i += 2 if (len(a) == 2 and a[1] in _ENV_ARG_OPTS) else 1
                continue
            if _NAME_ASSIGN_RE.match(a):
                i += 1
                continue
            break
        return i
    if name in ("command", "exec"):
        if args and args[0] in ("-v", "-V"):
            return None
        i = 0
        while i < len(args) and args[i].startswith("-"):
            i += 2 if args[i] == "-a" else 1
        return i
    if name in _WRAPPERS_WITH_OPTS:
        arg_opts = _WRAPPERS_WITH_OPTS[name]
        i = 0
        while i < len(args) and args[i].startswith("-") and len(args[i]) > 1:
            a = args[i]
            i += 2 if (len(a) == 2 and a[1] in arg_opts) else 1
        return i
    if name in ("timeout", "gtimeout"):
        i = 0
        while i < len(args) and args[i].startswith("-"):
            i += 2 if args[i] in ("-s", "-k") else 1
        return i + 1 if i < len(args) and _DURATION_RE.match(args[i]) else i
    if name in ("chrt", "taskset"):
        i = 0
        while i < len(args) and args[i].startswith("-"):
            i += 1
        return i + 1  # priority / cpu mask
    if name in ("busybox", "toybox"):
        return 0
    if name in ("su", "runuser"):
        for k, a in enumerate(args):
            if a in ("-c", "--command") and k + 1 < len(args):
                nested.append(args[k + 1])
            elif a.startswith("--command="):
                nested.append(a.split("=", 1)[1])
        if "--" in args and name == "runuser":
            return args.index("--") + 1
        return len(args)
    if name == "flock":
        for k, a in enumerate(args):
            if a in ("-c", "--command") and k + 1 < len(args):
                nested.append(args[k + 1])
                return len(args)
        ops = operands(args, frozenset("wE"))
        return args.index(ops[0]) + 1 if ops else len(args)
    if name == "watch":
        i = 0
        while i < len(args) and args[i].startswith("-"):
            i += 2 if args[i] in ("-n", "-d", "--interval") else 1
        nested.append(" ".join(args[i:]))
        return len(args)
    if name == "chroot":
        ops = operands(args)
        return args.index(ops[0]) + 1 if ops else len(args)
    return None


def resolve(words: list[Word], redirects: list[Redirect]) -> Cmd | None:
    """Strip wrappers from ``words`` and return the effective :class:`Cmd`.

    Returns ``None`` for segments that run nothing by themselves (``for x in
    ...``, ``case``, closing keywords, an empty command without redirections).
    """
    texts = [w.text for w in words]
    raws = [w.raw for w in words]
    nested: list[str] = []
    wrappers: list[str] = []
    i = 0
    # Bounded: every iteration consumes at least one word.
    while i < len(words):
        name = basename(texts[i], raws[i])
        if name in _SKIP_SEGMENT:
            return Cmd("", [""], [""], redirects, nested, wrappers) if nested else None
        drop = _strip_wrapper(name, texts[i + 1 :], nested)
        if drop is None:
            break
        wrappers.append(name)
        i += 1 + drop
    if i >= len(words):
        if not nested and not redirects:
            return None
        return Cmd("", [""], [""], redirects, nested, wrappers)
    return Cmd(
        basename(texts[i], raws[i]),
        texts[i:],
        raws[i:],
        redirects,
        nested,
        wrappers,
        [w.subs for w in words[i:]],
    )


def resolve_argv(argv: list[str]) -> Cmd | None:
    """:func:`resolve` for an argument vector that did not come from the lexer."""
    return resolve([Word(a, shlex.quote(a)) for a in argv], [])
