"""The bootstrap script a session shell runs (POSIX sh: bash, dash and busybox ash).

Each command runs in a subshell that is its own process group (``set -m``),
with stdin from /dev/null and stderr merged into stdout, so that:

* a timeout kills exactly the command's process tree, never the session shell;
* ``exit`` ends only the subshell, and its status is reported;
* a command reading stdin gets EOF at once instead of eating the control stream.

The subshell reports its environment, cwd and exit status when it exits
(``trap ... EXIT``), so the controller can answer without waiting for the parent
shell's own end marker, which it consumes at the next call. The marker token is
kept in two halves so the whole token never appears in ``set`` output or in a
function body.

Where ``/proc`` exists the shell *serves*: it forks the subshell for the next
command as soon as the last one ended, and that subshell waits for its one line
(:func:`serve_line`) on the control stream. The fork -- the dearest step of a
short command, and dearer still in a jail -- happens while the caller is away.
The waiting subshell is a copy of the parent as it was after start-up, so the
line carries the statements that move it to the session's state (``cd`` and
``export`` persist that way); when they grow past :data:`REBASE_BYTES` the
controller moves the parent itself (:data:`REBASE_REQUEST`, then the statements
as one line for the parent). The subshell reports its own pid (read from
``/proc/self/stat``, no fork) as its first write, so that marker never races
with the command's output.

Without ``/proc`` the parent reads one ``__sbx_run`` line per command, forks then,
reports the pid itself, and the controller replays changes into the parent
before each command.
"""

from __future__ import annotations

import re
from typing import Protocol

from environments.errors import InvalidCommand, SandboxDead
from environments.shell.framing import shell_quote

_TEMPLATE = r"""
exec 2>/dev/null
set -m
__sbx_a={half_a}
__sbx_b={half_b}
__sbx_nl='
'
__sbx_mark() {{ printf '%s%s%s%s%s%s.' "$__sbx_a" "$__sbx_b" "$1" "$2" "$__sbx_a" "$__sbx_b"; }}
__sbx_dump() {{
  # The environment, then (in one write: each write may cost the stream a record) its
  # end, the cwd and the marker "$1" "$2".
  printf '%s%sS' "$__sbx_a" "$__sbx_b"; export -p
  printf '%s%s.%s%sC%s%s%s.%s%s%s%s%s%s.' "$__sbx_a" "$__sbx_b" "$__sbx_a" "$__sbx_b" \
    "$PWD" "$__sbx_a" "$__sbx_b" "$__sbx_a" "$__sbx_b" "$1" "$2" "$__sbx_a" "$__sbx_b"
}}
__sbx_self=
[ -r /proc/self/stat ] && __sbx_self=1
__sbx_report() {{
  # A command may have sent its own stdout elsewhere (exec >build.log) or closed it: the
  # report then goes to the session shell's stdout, reopened ("$$" is that shell), never
  # into the command's file (where that cannot be opened, nowhere: the parent's end
  # marker answers the call). A session shell that is gone (the command ended it) has no
  # stdout to compare with: the report goes to the command's own, as it does by default.
  if [ -z "$__sbx_self" ] || [ /proc/self/fd/1 -ef "/proc/$$/fd/1" ] || ! [ -e "/proc/$$/fd/1" ]
  then __sbx_dump "$@"
  else {{ __sbx_dump "$@"; }} 2>/dev/null >"/proc/$$/fd/1"; fi
}}
__sbx_traps() {{
  # A command ended by one of these signals reports 128+N (the EXIT trap would see the
  # status of its last statement instead); the command's own traps replace these.
  trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 138' USR1; trap 'exit 140' USR2
  trap 'exit 142' ALRM; trap 'exit 143' TERM
}}
__sbx_go() {{
  if [ -n "$2" ]; then cd -- "$2" 2>/dev/null || {{ __sbx_mark W ''; exit 1; }}; fi
  __sbx_c=$1
  set --
  # The report runs with the shell's own options, whatever the command set (no trace of
  # it in the output).
  trap '{{ __sbx_x=$?; set +euvx; }} 2>/dev/null; __sbx_report X "$__sbx_x"' EXIT
  eval "$__sbx_c"
}}
__sbx_run() {{
  if [ -n "$__sbx_lost" ]; then __sbx_lost=; __sbx_mark W cwd; __sbx_mark E 1; return; fi
  ( __sbx_traps; __sbx_go "$1" "$2" ) </dev/null 2>&1 &
  __sbx_pg=$!
  __sbx_mark P "$__sbx_pg"
  wait "$__sbx_pg"
  __sbx_mark E "$?"
}}
__sbx_eof() {{
  # The control stream ended: end the parent too, unless it is gone already (then its
  # pid may be another process's by now).
  IFS=' ' read -r __sbx_p __sbx_r < /proc/self/stat
  __sbx_r=${{__sbx_r##*) }}
  IFS=' '
  set -- $__sbx_r
  [ "$2" != "$$" ] || kill $$
  exit 0
}}
__sbx_serve() {{
  exec 3<&0
  __sbx_l=
  while :; do
    ( # Ahead of the line, what does not depend on it: stdin and stderr, the own pid,
      # and (bash sets up its handlers at a subshell's first EXIT trap) a trap.
      exec </dev/null 2>&1
      trap : EXIT
      __sbx_traps
      IFS=' ' read -r __sbx_p __sbx_r < /proc/self/stat
      [ -n "$__sbx_l" ] || IFS= read -r __sbx_l <&3 || __sbx_eof
      exec 3<&-
      __sbx_mark P "$__sbx_p"
      eval "$__sbx_l"
    ) &
    __sbx_pg=$!
    __sbx_l=
    wait "$__sbx_pg"
    __sbx_rc=$?
    __sbx_mark E "$__sbx_rc"
    if [ "$__sbx_rc" = {rebase_status} ]; then
      # The parent reads the next line itself: statements for it, which end by handing
      # the next subshell its line (a terminal may pass more than one line to a read,
      # and the rest is lost: so only one line is sent), or (when a command merely
      # exited with this status) a command line for the next subshell.
      IFS= read -r __sbx_l <&3 || exit 0
      case $__sbx_l in
        {rebase_prefix}*) __sbx_s=$__sbx_l; __sbx_l=; eval "$__sbx_s" ;;
      esac
    fi
  done
}}
__sbx_start=
if [ -n "$__sbx_self" ] && read -r __sbx_st < /proc/$$/stat; then
  __sbx_st=${{__sbx_st##*) }}
  set -- $__sbx_st
  __sbx_start=${{20}}
  set --
fi
if [ -n "$__sbx_self" ]; then __sbx_dump R "$$ $__sbx_start serving"; __sbx_serve
else __sbx_dump R "$$ $__sbx_start"; fi
"""


def bootstrap_script(token: str) -> bytes:
    """The script that turns a fresh ``sh -s`` into a session shell speaking markers."""
    half = len(token) // 2
    return _TEMPLATE.format(
        half_a=shell_quote(token[:half]),
        half_b=shell_quote(token[half:]),
        rebase_status=REBASE_STATUS,
        rebase_prefix=shell_quote(_REBASE_PREFIX),
    ).encode()


SERVING = "serving"
"""The last word of a serving shell's ready marker."""

REBASE_BYTES = 2048
"""Statements longer than this are applied to a serving shell's parent once
(:data:`REBASE_REQUEST`) instead of riding on every command's line: bash reads its
line a byte at a time."""

REBASE_STATUS = 213
"""The exit status with which a serving shell's subshell has the parent read the next
line itself. A command may exit so too: the parent then finds a command line there,
not statements, and hands it to the next subshell as usual (no signal is involved,
so nothing a command sends its shell can cut a read short)."""

REBASE_REQUEST = f"exit {REBASE_STATUS}\n".encode()
"""A serving shell's waiting subshell, on reading this, has its parent read one line of
statements (:func:`statements_line`) before it forks the next subshell; the parent's
end marker, with :data:`REBASE_STATUS`, comes first."""

_REBASE_PREFIX = ": rebase; "
"""How a line of statements for a serving shell's parent begins."""


def command_script(command: str, workdir: str | None, env: dict[str, str] | None) -> str:
    """``command`` with the per-call ``env`` exported ahead of it. Raises
    :class:`~environments.errors.InvalidCommand` for a NUL byte or a lone surrogate in
    the command, ``workdir`` or a value, for an invalid variable name, and for a name the
    shell or sbx manages itself (``PWD``, ``OLDPWD``, ``SHLVL``, ``_``, ``__sbx*``)."""
    if "\x00" in command or (workdir and "\x00" in workdir):
        raise InvalidCommand("command and workdir must not contain NUL bytes")
    for name, value in (env or {}).items():
        if not _ENV_NAME.match(name) or "\x00" in value:
            raise InvalidCommand(f"invalid environment variable name or value: {name!r}")
        if name in SHELL_MANAGED or name.startswith("__sbx"):
            raise InvalidCommand(f"{name} is managed by the shell and cannot be set per call")
    for text in (command, workdir or "", *(env or {}).values()):
        try:
            text.encode()
        except UnicodeEncodeError:
            raise InvalidCommand(
                "command, workdir and environment values must be text (no lone surrogates)"
            ) from None
    if not env:
        return command
    exports = " ".join(f"{k}={shell_quote(v)}" for k, v in env.items())
    return f"export {exports}\n{command}"


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def run_line(command: str, workdir: str | None) -> bytes:
    """The line that runs ``command`` (optionally in ``workdir``) in a shell without
    ``/proc``, whose parent reads it."""
    return _bytes(f"__sbx_run {shell_quote(command)} {shell_quote(workdir or '')}\n")


def serve_line(statements: list[str], command: str, workdir: str | None) -> bytes:
    """The one line a serving shell's waiting subshell reads: ``statements`` (from
    :func:`restore_statements`), then ``command`` (optionally in ``workdir``)."""
    return _bytes(_serve_text(statements, command, workdir) + "\n")


def _serve_text(statements: list[str], command: str, workdir: str | None) -> str:
    run = f"__sbx_go {one_line_word(command)} {one_line_word(workdir or '')}"
    return "; ".join([*statements, run])


def statements_line(
    statements: list[str], then: list[str], command: str, workdir: str | None
) -> bytes:
    """The one line a serving shell's parent reads after :data:`REBASE_REQUEST`: it runs
    ``statements`` and hands the next subshell the line of :func:`serve_line` (``then``,
    ``command``, ``workdir``)."""
    line = one_line_word(_serve_text(then, command, workdir))
    return _bytes(_REBASE_PREFIX + "; ".join([*statements, f"__sbx_l={line}"]) + "\n")


def _bytes(line: str) -> bytes:
    # The session's state holds the bytes the shell reported, undecodable ones as
    # surrogate escapes; they go back to the shell as those same bytes.
    return line.encode("utf-8", "surrogateescape")


def one_line_word(value: str) -> str:
    """``value`` as one shell word on one physical line: newlines come from the
    script's ``$__sbx_nl``, since a waiting subshell reads exactly one line."""
    return shell_quote(value).replace("\n", "'\"$__sbx_nl\"'")


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

# Variables that change how a shell reads its input (field splitting, a timeout on
# ``read``): a serving shell's parent never takes them, each command's line sets them.
PARENT_UNSAFE = frozenset({"IFS", "TMOUT"})


def restore_lines(
    current: dict[str, str], wanted: dict[str, str], current_cwd: str, wanted_cwd: str
) -> bytes:
    """Builtin-only commands that move a parent shell from one state to another."""
    parts = restore_statements(current, wanted, current_cwd, wanted_cwd, in_parent=True)
    return _bytes("\n".join(parts) + "\n") if parts else b""


def restore_statements(
    current: dict[str, str],
    wanted: dict[str, str],
    current_cwd: str,
    wanted_cwd: str,
    *,
    in_parent: bool = False,
) -> list[str]:
    """Builtin-only statements (each free of newlines) that move a shell from
    ``current`` to ``wanted``. When ``wanted_cwd`` is gone, a command's subshell reports
    ``W cwd`` and ends (nothing runs elsewhere); a parent (``in_parent``) leaves that to
    its next ``__sbx_run``."""
    parts: list[str] = []
    for name in current.keys() - wanted.keys() - SHELL_MANAGED:
        parts.append(f"unset {name}")
    for name, value in wanted.items():
        if name in SHELL_MANAGED or current.get(name) == value:
            continue
        parts.append(f"export {name}={one_line_word(value)}")
    if wanted_cwd != current_cwd:
        lost = "__sbx_lost=1" if in_parent else "{ __sbx_mark W cwd; exit 1; }"
        parts.append(f"cd -- {one_line_word(wanted_cwd)} 2>/dev/null || {lost}")
    return parts
