"""Reading git's command line: global options, the subcommand, settings that run programs.

Contract: pure functions over one effective :class:`~registry.approval.shell.resolve.Cmd`;
used by the git rules and by :mod:`.channels` (which hands the programs git
would run to the detector).
"""

from __future__ import annotations

import re

from registry.approval.shell.resolve import Cmd

__all__ = ["git_config_exec_values", "git_subcommand"]

_GIT_ARG_OPTS = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace",
                           "--config-env", "--exec-path", "--super-prefix"})  # fmt: skip
# Settings whose value is a program git runs.
_EXEC_KEY_RE = re.compile(
    r"^(?:core\.(?:sshcommand|pager|editor|fsmonitor|hookspath|askpass|gitproxy)"
    r"|diff\.external|diff\.[^.]+\.(?:textconv|command)|merge\.[^.]+\.driver"
    r"|filter\.[^.]+\.(?:clean|smudge|process)|sequence\.editor|gpg\.program"
    r"|gpg\.[^.]+\.program|uploadpack\.packobjectshook|credential\.helper|alias\.[^.]+"
    r"|protocol\.ext\.allow|include\.path|includeif\..+\.path|remote\.[^.]+\.(?:uploadpack|receivepack)"
    r"|interactive\.difffilter|pager\.[^.]+|instaweb\.httpd)$",
    re.IGNORECASE,
)
_EXEC_ENV = frozenset({"GIT_SSH_COMMAND", "GIT_SSH", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS",
                       "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER", "GIT_CONFIG_PARAMETERS",
                       "GIT_PROXY_COMMAND", "GIT_EXEC_PATH"})  # fmt: skip
_PLAIN_PROGRAMS = re.compile(r"^(?:cat|less(?: -\w+)*|more|true|vi|vim|nano|emacs|code --wait|:)$")


def git_subcommand(cmd: Cmd) -> tuple[str, list[str], list[str]]:
    """``(subcommand, its args, global options)`` of a git command (``("", [], [])`` if none)."""
    if cmd.name != "git":
        return "", [], []
    args = cmd.args
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("-"):
            return a.lower(), args[i + 1 :], args[:i]
        i += 2 if a in _GIT_ARG_OPTS else 1
    return "", [], args


def _exec_value(key: str, value: str) -> str | None:
    """The program a git setting runs, or None (an alias without ``!`` runs git itself)."""
    if not _EXEC_KEY_RE.match(key):
        return None
    if key.lower().startswith("alias."):
        return value[1:] if value.startswith("!") else None
    return value


def git_config_exec_values(cmd: Cmd) -> list[str]:
    """Values of settings that make git run a program, from ``-c``, ``git config`` or env."""
    out: list[str] = []
    sub, rest, globals_ = git_subcommand(cmd)
    for i, a in enumerate(globals_[:-1]):
        if a == "-c":
            key, _, value = globals_[i + 1].partition("=")
            found = _exec_value(key, value)
            if found is not None:
                out.append(found)
    if sub == "config":
        ops = [a for a in rest if not a.startswith("-")]
        found = _exec_value(ops[0], ops[1]) if len(ops) >= 2 else None
        if found is not None:
            out.append(found)
    for name, value in cmd.env_assigns.items():
        if name in _EXEC_ENV and not _PLAIN_PROGRAMS.match(value.strip()):
            out.append(value)
    return out
