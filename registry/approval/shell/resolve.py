"""From parsed simple commands to the effective command that will run.

Contract: :func:`resolve` takes the (expanded) words of one simple command and
returns a :class:`Cmd` whose ``argv`` starts at the program that actually
runs, with wrapper prefixes removed (``sudo``, ``env``, ``nohup``,
``timeout 5``, ``nice -n 5``, ``command``, ``exec``, ``busybox``, shell
reserved words such as ``then``/``do``/``!``/``{``), plus the nested scripts
that the wrappers carry (``su -c '...'``, ``env -S '...'``, ``watch '...'``,
``flock f -c '...'``). Option parsing is approximate but errs toward exposing
the inner command. :func:`xargs_command` and :func:`find_exec_commands` name
the commands ``xargs`` and ``find -exec`` run.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from registry.approval.shell.args import operands, word_set
from registry.approval.shell.state import Context
from registry.approval.shell.syntax import Redirect, Word

__all__ = [
    "UNKNOWN_SUB",
    "UNKNOWN_VAR",
    "Cmd",
    "basename",
    "find_exec_commands",
    "resolve",
    "resolve_argv",
    "resolve_names",
    "xargs_command",
]

# Values of Cmd.unknown entries besides 0 (known).
UNKNOWN_SUB = 1  # the output of a command substitution that cannot be evaluated
UNKNOWN_VAR = 2  # a variable whose value cannot be known

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
# Package runners: "npx prisma ...", "uv run pytest", "bundle exec rake ...".
_RUNNERS = frozenset({"npx", "bunx", "pnpx", "uvx"})
_RUNNER_VERBS = {
    "pnpm": ("exec", "dlx"), "yarn": ("exec", "dlx"), "uv": ("run",), "poetry": ("run",),
    "pipenv": ("run",), "bundle": ("exec",), "pdm": ("run",), "hatch": ("run",), "rye": ("run",),
    "npm": ("exec",), "bun": ("x",), "conda": ("run",), "mamba": ("run",), "pipx": ("run",),
}  # fmt: skip
_RUNNER_ARG_OPTS = frozenset({"-p", "--package", "-c", "--call", "--with", "--from", "-n", "--name",
                              "--python", "--env", "-e"})  # fmt: skip
_SKIP_SEGMENT = frozenset({"for", "case", "select", "function", "}", "fi", "done", "esac", "in"})
_SUDO_ARG_OPTS = frozenset("ugCDhprtUTR")
_ENV_ARG_OPTS = frozenset("uCP")
# Options taking the next word (-i, -e, -l take an optional attached value only).
_XARGS_ARG_OPTS = frozenset("ILnPsEda")
_WIN_EXT_RE = re.compile(r"\.(exe|cmd|bat|com)$", re.IGNORECASE)
_WIN_PATH_RE = re.compile(r"^[A-Za-z]:\\")
_NAME_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_DURATION_RE = re.compile(r"^\d+(\.\d+)?[smhd]?$")


@dataclass(slots=True)
class Cmd:
    """The effective command of one simple command.

    ``name`` is the lower-cased basename of the program (``/usr/bin/RM.exe`` ->
    ``rm``, ``""`` when nothing runs); ``argv`` the argument texts after quote
    removal and expansion; ``raw`` the matching source slices (for Windows
    paths whose backslashes the lexer removed); ``unknown`` marks the argv
    entries holding an expansion whose value is unknown (:data:`UNKNOWN_SUB`
    or :data:`UNKNOWN_VAR`; ``unknown[0]``: the program itself cannot be
    resolved); ``nested`` scripts the wrappers carry;
    ``wrapper_args`` the words of the wrappers (``sudo -S`` ...); ``env_assigns``
    the ``NAME=value`` words in front of the command (its own environment);
    ``pipeline``/``index`` place the command in its pipeline; ``cwd`` is the
    working directory when the analysis could follow it (``cd``), else None;
    ``ctx`` the analysis-wide :class:`~registry.approval.shell.state.Context`.
    """

    name: str
    argv: list[str]
    raw: list[str]
    redirects: list[Redirect] = field(default_factory=list)
    nested: list[str] = field(default_factory=list)
    wrappers: list[str] = field(default_factory=list)
    subs: list[list[str]] = field(default_factory=list)
    unknown: list[int] = field(default_factory=list)
    wrapper_args: list[str] = field(default_factory=list)
    env_assigns: dict[str, str] = field(default_factory=dict)
    pipeline: list[Cmd] = field(default_factory=list)
    index: int = 0
    cwd: str | None = None
    ctx: Context = field(default_factory=Context)
    # Memos of inline_code() and write_targets(), which many matchers ask for.
    code_memo: list[str | None] = field(default_factory=list)
    writes_memo: dict[bool, list[tuple[str, bool]]] = field(default_factory=dict)

    @property
    def args(self) -> list[str]:
        """Arguments after the program name."""
        return self.argv[1:]

    @property
    def dynamic(self) -> bool:
        """True when the program name itself could not be resolved statically."""
        return bool(self.unknown) and self.unknown[0] != 0

    def arg_unknown(self, index: int) -> bool:
        """True when ``args[index]`` holds an expansion whose value is unknown."""
        return index + 1 < len(self.unknown) and self.unknown[index + 1] != 0

    def piped_from(self) -> list[Cmd]:
        """Commands earlier in the same pipeline (their output reaches this stdin)."""
        return self.pipeline[: self.index]


def basename(word: str, raw: str | None = None) -> str:
    """Lower-cased program name of ``word`` without directory or Windows extension."""
    if raw and ":" in raw and _WIN_PATH_RE.match(raw.strip("'\"")):
        word = raw.strip("'\"").replace("\\", "/")
    name = word.rsplit("/", 1)[-1].lower()
    return _WIN_EXT_RE.sub("", name) if "." in name else name


def _runner_options(args: list[str], start: int, nested: list[str]) -> int:
    i = start
    while i < len(args) and args[i].startswith("-"):
        if args[i] == "--":
            return i + 1
        if args[i] in ("-c", "--call") and i + 1 < len(args):
            nested.append(args[i + 1])  # "npx -c 'cmd'" runs cmd in a shell
        i += 2 if args[i] in _RUNNER_ARG_OPTS and "=" not in args[i] else 1
    return i


def _strip_wrapper(name: str, args: list[str], nested: list[str]) -> int | None:
    """How many leading words of ``args`` to drop after wrapper ``name``; None if not a wrapper."""
    if name in _WRAPPERS_NO_ARGS:
        return 0
    if name in _RUNNERS:
        return _runner_options(args, 0, nested)
    verbs = _RUNNER_VERBS.get(name)
    if verbs is not None:
        return _runner_options(args, 1, nested) if args[:1] and args[0] in verbs else None
    if name == "dotenv":
        return args.index("--") + 1 if "--" in args else None
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
        if words[i].unknown:
            break
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
        [w.unknown for w in words[i:]],
        texts[:i],
    )


def resolve_argv(argv: list[str]) -> Cmd | None:
    """:func:`resolve` for an argument vector that did not come from the lexer."""
    return resolve([Word(a, shlex.quote(a)) for a in argv], [])


def resolve_names(argv: list[str]) -> str:
    """Effective program name of ``argv`` after wrapper stripping (``sudo rm`` -> ``rm``)."""
    inner = resolve_argv(argv)
    return inner.name if inner is not None else ""


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
