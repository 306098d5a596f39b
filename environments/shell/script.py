"""The bootstrap script a session shell runs (POSIX sh: bash, dash and busybox ash).

Each command runs in a subshell that is its own process group (``set -m``),
with stdin from /dev/null and stderr merged into stdout, so that:

* a timeout kills exactly the command's process tree, never the session shell;
* ``exit`` ends only the subshell, and its status is reported;
* a command reading stdin gets EOF at once instead of eating the control stream.

The subshell reports its environment, cwd and exit status when it exits
(``trap ... EXIT``), so the controller can answer without waiting for the parent
shell's own end marker, which it consumes at the next call;
the controller replays changes into the parent shell before the next command,
so ``cd`` and ``export`` persist. The marker token is kept in two halves so the
whole token never appears in ``set`` output or in a function body.

The subshell reports its own pid (read from ``/proc/self/stat``, no fork) as its
first write: when the parent printed it, that marker raced with the command's
output and could land inside the multi-write environment dump of a fast
command, which then leaked into the output unparsed. Without ``/proc`` the
parent reports it as before.
"""

from __future__ import annotations

from typing import Protocol

from environments.errors import SandboxDead
from environments.shell.framing import shell_quote

_TEMPLATE = r"""
exec 2>/dev/null
set -m
__sbx_a={half_a}
__sbx_b={half_b}
__sbx_mark() {{ printf '%s%s%s%s%s%s.' "$__sbx_a" "$__sbx_b" "$1" "$2" "$__sbx_a" "$__sbx_b"; }}
__sbx_dump() {{
  printf '%s%sS' "$__sbx_a" "$__sbx_b"; export -p; printf '%s%s.' "$__sbx_a" "$__sbx_b"
  __sbx_mark C "$PWD"
}}
__sbx_self=
[ -r /proc/self/stat ] && __sbx_self=1
__sbx_run() {{
  ( if [ -n "$__sbx_self" ]; then
      read -r __sbx_p __sbx_r < /proc/self/stat && __sbx_mark P "$__sbx_p"
    fi
    if [ -n "$2" ]; then cd -- "$2" 2>/dev/null || {{ __sbx_mark W ''; exit 1; }}; fi
    trap '__sbx_rc=$?; __sbx_dump; __sbx_mark X "$__sbx_rc"' EXIT
    eval "$1"
  ) </dev/null 2>&1 &
  __sbx_pg=$!
  [ -n "$__sbx_self" ] || __sbx_mark P "$__sbx_pg"
  wait "$__sbx_pg"
  __sbx_mark E "$?"
}}
__sbx_start=
if [ -n "$__sbx_self" ] && read -r __sbx_st < /proc/$$/stat; then
  __sbx_st=${{__sbx_st##*) }}
  set -- $__sbx_st
  __sbx_start=${{20}}
  set --
fi
__sbx_dump
__sbx_mark R "$$ $__sbx_start"
"""


def bootstrap_script(token: str) -> bytes:
    """The script that turns a fresh ``sh -s`` into a session shell speaking markers."""
    half = len(token) // 2
    return _TEMPLATE.format(
        half_a=shell_quote(token[:half]), half_b=shell_quote(token[half:])
    ).encode()


def run_line(command: str, workdir: str | None) -> bytes:
    """The line that runs ``command`` (optionally in ``workdir``) in the session shell."""
    return f"__sbx_run {shell_quote(command)} {shell_quote(workdir or '')}\n".encode()


_SHELLS = {
    "sh": "exec sh -s",
    "bash": "exec bash --noprofile --norc -s",
    "auto": "command -v bash >/dev/null 2>&1 && exec bash --noprofile --norc -s; exec sh -s",
}
_PID_LINE = b"sbx-shell-pid "


def start_script(shell: str) -> str:
    """An ``sh -c`` script that prints the shell's pid line (read it with
    :func:`started_shell_pid`), then becomes the session shell reading its script from stdin:
    ``shell`` is ``sh``, ``bash``, or ``auto`` (bash when the image has it, else sh)."""
    return f'echo "{_PID_LINE.decode()}$$"; {_SHELLS[shell]}'


class StartingChannel(Protocol):
    def read_line(self, timeout: float) -> bytes: ...
    def close(self) -> None: ...


def started_shell_pid(channel: StartingChannel, timeout: float, where: str) -> int:
    """The pid of the shell :func:`start_script` started on ``channel``, from its first line.

    Raises :class:`~environments.errors.SandboxDead` (after closing ``channel``) when that
    line is something else (the shell did not start)."""
    line = channel.read_line(timeout)
    pid = line.removeprefix(_PID_LINE).strip()
    if not pid.isdigit():
        channel.close()
        raise SandboxDead(f"the shell in {where} did not start: {line[:200]!r}")
    return int(pid)


# Variables the shell itself maintains; never replayed.
SHELL_MANAGED = frozenset({"PWD", "OLDPWD", "SHLVL", "_"})


def restore_lines(
    current: dict[str, str], wanted: dict[str, str], current_cwd: str, wanted_cwd: str
) -> bytes:
    """Builtin-only commands that move a parent shell from one state to another."""
    parts: list[str] = []
    for name in current.keys() - wanted.keys() - SHELL_MANAGED:
        parts.append(f"unset {name}")
    for name, value in wanted.items():
        if name in SHELL_MANAGED or current.get(name) == value:
            continue
        parts.append(f"export {name}={shell_quote(value)}")
    if wanted_cwd != current_cwd:
        parts.append(f"cd -- {shell_quote(wanted_cwd)}")
    return ("\n".join(parts) + "\n").encode() if parts else b""
