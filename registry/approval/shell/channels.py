"""Programs that run a command they are handed: the side channels of a shell.

Contract: :func:`channel_scripts` returns the shell texts that ``cmd`` will run
through a channel other than a shell's ``-c``: ``awk`` (``system("...")``,
``"cmd" | getline``, ``print | "cmd"``), ``sed``'s ``e`` command, editors
(``vim -c ':!...'``, ``emacs --eval '(shell-command "...")'``), terminal
multiplexers (``tmux send-keys``, ``tmux new-session CMD``, ``screen -X stuff``),
``git`` (``submodule foreach``, ``rebase --exec``, ``bisect run``,
``filter-branch --tree-filter``), ``tar --to-command``, ``rsync -e``,
``ssh -o ProxyCommand=``, ``parallel``, ``script -c``, ``at``/``batch``, and
variables holding a command (``GIT_SSH_COMMAND=...``, ``PROMPT_COMMAND=...``).
:func:`script_run_target` names the file a command executes (``sh x.sh``,
``./x.sh``, ``python x.py``, ``make``) so a file written earlier in the same
command can be judged by its content. Literal texts only: what is computed at
run time is left to :mod:`registry.approval.rules.interpreters`.
"""

from __future__ import annotations

import posixpath
import re

from registry.approval.shell.args import (
    join_argv,
    operands,
    option_value,
    shell_c_script,
    word_set,
)
from registry.approval.shell.dataflow import interpreter, stdin_text
from registry.approval.shell.gitargs import git_config_exec_values, git_subcommand
from registry.approval.shell.names import EDITORS, SHELLS
from registry.approval.shell.resolve import Cmd

__all__ = [
    "COMMAND_VARIABLES",
    "awk_program",
    "channel_scripts",
    "script_run_target",
    "sed_program",
    "written_script",
]

# Variables whose value is a command some program runs.
COMMAND_VARIABLES = word_set(
    """
    GIT_SSH_COMMAND GIT_SSH GIT_EXTERNAL_DIFF GIT_EDITOR GIT_SEQUENCE_EDITOR GIT_PAGER
    GIT_ASKPASS GIT_PROXY_COMMAND PAGER EDITOR VISUAL LESSOPEN LESSCLOSE PROMPT_COMMAND
    SUDO_ASKPASS SSH_ASKPASS MANPAGER SYSTEMD_PAGER
    """
)
_AWK = frozenset({"awk", "gawk", "mawk", "nawk"})
_STR = r'"((?:[^"\\]|\\.)*)"'
_AWK_LITERAL_RES = (
    re.compile(r"\bsystem\s*\(\s*" + _STR + r"\s*\)"),
    re.compile(_STR + r"\s*\|\s*getline"),
    re.compile(r"\|\s*" + _STR),
    re.compile(r"\bprintf?\s+" + _STR + r"\s*\|\s*\"(?:/bin/|/usr/bin/)?(?:ba|z|da|k)?sh\""),
)
_SED_E_RE = re.compile(r"(?:^|[;\n{}])\s*[0-9$,/!]*\s*e\s+([^;\n}]+)")
_VIM_BANG_RE = re.compile(
    r"^\s*:?\s*(?:sil(?:ent)?!?\s*)?(?:[%.$]|\d+(?:,\d+)?)?\s*(?:r(?:ead)?|w(?:rite)?)?\s*!(.+)$"
)
_SYSTEM_CALL_RE = re.compile(r"\bsystem(?:list)?\s*\(\s*[\"']([^\"']*)[\"']")
_ELISP_SHELL_RE = re.compile(r"\((?:shell-command(?:-to-string)?|async-shell-command)\s+" + _STR)
_ELISP_PROCESS_RE = re.compile(
    r"\((?:call-process|start-process|process-lines)\s+((?:\s*(?:" + _STR + r"|nil|t|\d+))+)"
)
_TMUX_OPTS = frozenset("stcnxyFeTlpLb")
_TMUX_RUNS = word_set(
    """
    new-session new new-window neww split-window splitw respawn-pane respawnp run-shell run
    display-popup popup
    """
)
_TMUX_KEYS = {"Enter": "\n", "C-m": "\n", "KPEnter": "\n", "C-j": "\n", "Space": " "}
_GIT_FILTERS = frozenset({"--tree-filter", "--index-filter", "--msg-filter", "--env-filter",
                          "--commit-filter", "--parent-filter", "--tag-name-filter"})  # fmt: skip
_CODE_OPTS = {"python": "-c", "perl": "-e", "ruby": "-e", "node": "-e", "php": "-r", "lua": "-e"}
_SHEBANG_RE = re.compile(r"^#!\s*(?:\S*/)?(?:env\s+(?:-S\s+)?)?(?:\S*/)?([A-Za-z]+)")


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def awk_program(cmd: Cmd) -> str | None:
    """The program text of an ``awk`` call (None when it reads its program from a file)."""
    if cmd.name not in _AWK or "-f" in cmd.args:
        return None
    ops = operands(cmd.args, frozenset("Fvf"))
    return ops[0] if ops else None


def sed_program(cmd: Cmd) -> str | None:
    """The script of a ``sed`` call (all ``-e`` parts, or the first operand)."""
    if cmd.name not in ("sed", "gsed") or "-f" in cmd.args:
        return None
    parts = [cmd.args[i + 1] for i, a in enumerate(cmd.args[:-1]) if a in ("-e", "--expression")]
    parts += [a.split("=", 1)[1] for a in cmd.args if a.startswith("--expression=")]
    if parts:
        return "\n".join(parts)
    ops = operands(cmd.args, frozenset("l"))
    return ops[0] if ops else None


def _first_operand(args: list[str], arg_opts: frozenset[str]) -> int:
    """Index of the first argument that is not an option (short ``arg_opts`` take a value)."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            return i + 1
        i += 2 if args[i][-1] in arg_opts and not args[i].startswith("--") else 1
    return i


def _awk(cmd: Cmd) -> list[str]:
    program = awk_program(cmd)
    if program is None:
        return []
    return [_unescape(m.group(1)) for rx in _AWK_LITERAL_RES for m in rx.finditer(program)]


def _editor(cmd: Cmd) -> list[str]:
    out: list[str] = []
    args = cmd.args
    if cmd.name in ("emacs", "emacsclient"):
        exprs = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("--eval", "-eval", "-e")]
        exprs += [a.split("=", 1)[1] for a in args if a.startswith("--eval=")]
        for expr in exprs:
            out.extend(_unescape(m.group(1)) for m in _ELISP_SHELL_RE.finditer(expr))
            for m in _ELISP_PROCESS_RE.finditer(expr):
                words = [_unescape(w) for w in re.findall(_STR, m.group(1))]
                out.append(join_argv(words[1:] if "start-process" in m.group(0) else words))
        return out
    commands = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-c", "--cmd")]
    commands += [a[1:] for a in args if a.startswith("+") and len(a) > 1]
    for c in commands:
        bang = _VIM_BANG_RE.match(c)
        if bang:
            out.append(bang.group(1))
        out.extend(m.group(1) for m in _SYSTEM_CALL_RE.finditer(c))
    return out


def _tmux(cmd: Cmd) -> list[str]:
    args = cmd.args
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in ("-L", "-S", "-f") else 1
    verb, rest = (args[i], args[i + 1 :]) if i < len(args) else ("", [])
    j = 0
    while j < len(rest) and rest[j].startswith("-") and rest[j] != "--":
        j += 2 if len(rest[j]) == 2 and rest[j][1] in _TMUX_OPTS else 1
    tail = rest[j + 1 :] if rest[j : j + 1] == ["--"] else rest[j:]
    if verb in ("send-keys", "send"):
        return ["".join(_TMUX_KEYS.get(k, k) for k in tail)] if tail else []
    if verb in _TMUX_RUNS:
        return [" ".join(tail)] if tail else []
    return []


def _screen(cmd: Cmd) -> list[str]:
    args = cmd.args
    if "-X" in args:
        k = args.index("-X")
        if args[k + 1 : k + 2] == ["stuff"] and len(args) > k + 2:
            return [args[k + 2].replace("^M", "\n").replace("\\n", "\n")]
        return []
    rest = args[_first_operand(args, frozenset("STcdhpsx")) :]
    return [join_argv(rest)] if rest else []


def _git(cmd: Cmd) -> list[str]:
    out = list(git_config_exec_values(cmd))
    sub, rest, _ = git_subcommand(cmd)
    if sub == "submodule" and rest[:1] == ["foreach"]:
        tail = [a for a in rest[1:] if a not in ("--recursive", "-q", "--quiet")]
        out.append(" ".join(tail))
    elif sub == "rebase":
        out.extend(rest[i + 1] for i, a in enumerate(rest[:-1]) if a in ("-x", "--exec"))
        out.extend(a.split("=", 1)[1] for a in rest if a.startswith("--exec="))
    elif sub == "bisect" and rest[:1] == ["run"]:
        out.append(join_argv(rest[1:]))
    elif sub == "filter-branch":
        out.extend(rest[i + 1] for i, a in enumerate(rest[:-1]) if a in _GIT_FILTERS)
    return out


def _option_commands(cmd: Cmd) -> list[str]:
    name, args = cmd.name, cmd.args
    out: list[str] = []
    if name in ("tar", "bsdtar", "gtar"):
        for opt in ("--to-command", "-I", "--use-compress-program", "--info-script",
                    "--new-volume-script"):  # fmt: skip
            value = option_value(args, opt)
            if value:
                out.append(value)
        out.extend(a.split("exec=", 1)[1] for a in args if "--checkpoint-action=exec=" in a)
    elif name == "rsync":
        for opt in ("-e", "--rsh", "--rsync-path"):
            value = option_value(args, opt)
            if value:
                out.append(value)
    elif name in ("ssh", "scp", "sftp", "autossh"):
        for i, a in enumerate(args):
            opt = args[i + 1] if a == "-o" and i + 1 < len(args) else a[2:] if a[:2] == "-o" else ""
            if "=" not in opt:
                opt = opt.replace(" ", "=", 1)
            key, _, value = opt.partition("=")
            if key.lower() in ("proxycommand", "localcommand", "knownhostscommand") and value:
                out.append(value)
    elif name == "script":
        value = option_value(args, "-c", "--command")
        if value:
            out.append(value)
    elif name in ("parallel", "sem"):
        head = args[: args.index(":::")] if ":::" in args else args
        tail = args[len(head) + 1 :]
        template = head[_first_operand(head, frozenset("jSPX")) :]
        if template:
            out.append(join_argv([*template, *tail]))
    elif name in ("at", "batch") and "-f" not in args:
        fed = stdin_text(cmd)
        if fed:
            out.append(fed)
    return out


def channel_scripts(cmd: Cmd) -> list[str]:
    """Shell texts ``cmd`` runs through a side channel (module docstring)."""
    name = cmd.name
    out: list[str] = [v for k, v in cmd.env_assigns.items() if k in COMMAND_VARIABLES]
    if name in _AWK:
        out.extend(_awk(cmd))
    elif name in ("sed", "gsed"):
        script = sed_program(cmd)
        if script:
            out.extend(m.group(1) for m in _SED_E_RE.finditer(script))
    elif name in EDITORS:
        out.extend(_editor(cmd))
    elif name == "tmux":
        out.extend(_tmux(cmd))
    elif name == "screen":
        out.extend(_screen(cmd))
    elif name == "git":
        out.extend(_git(cmd))
    else:
        out.extend(_option_commands(cmd))
    return out


def script_run_target(cmd: Cmd) -> tuple[str, str] | None:
    """``(path, language)`` of the file ``cmd`` executes, if it executes one.

    Languages: ``sh``, an interpreter family (``python``...), ``make`` or
    ``exec`` (run directly: the shebang decides).
    """
    name, args = cmd.name, cmd.args
    if name in SHELLS:
        if shell_c_script(args) is not None:
            return None
        ops = operands(args, frozenset("oO"))
        return (ops[0], "sh") if ops and ops[0] != "-" else None
    if name in ("source", "."):
        return (args[0], "sh") if args else None
    family = interpreter(name)
    if family is not None:
        if any(a in ("-c", "-e", "-E", "-m", "-r", "--eval", "-p") for a in args):
            return None
        ops = operands(args, frozenset("WXI"))
        return (ops[0], family) if ops and ops[0] != "-" else None
    if name in ("make", "gmake"):
        makefile = option_value(args, "-f", "--file", "--makefile") or "Makefile"
        directory = option_value(args, "-C", "--directory")
        return (posixpath.join(directory, makefile) if directory else makefile), "make"
    if "/" in cmd.argv[0]:
        return cmd.argv[0], "exec"
    return None


def written_script(cmd: Cmd) -> str | None:
    """Shell text to analyse for a file ``cmd`` runs that was written earlier with known content."""
    target = script_run_target(cmd)
    if target is None:
        return None
    path, language = target
    written = cmd.ctx.written_file(path, cmd.cwd)
    if written is None and language == "make" and path == "Makefile":
        written = cmd.ctx.written_file("makefile", cmd.cwd)
    if written is None or written.content is None:
        return None
    content = written.content
    if language == "exec":
        m = _SHEBANG_RE.match(content)
        language = (interpreter(m.group(1)) or "sh") if m else "sh"
    if language == "make":
        recipes = [line.lstrip("\t").lstrip("@-+") for line in content.split("\n")
                   if line.startswith("\t")]  # fmt: skip
        return "\n".join(recipes)
    if language in _CODE_OPTS:
        return join_argv([language, _CODE_OPTS[language], content])
    return content
