"""The shell commands the ``sbx`` sandbox sends through ``terminal``, and how answers are read.

inspect's contract asks for things the ``terminal`` tool does not do itself: stdout and
stderr apart, standard input, per-call cwd and variables that do not stick to the
session, exact errors for files. Each exec therefore runs its command in a subshell
(``cd``, ``export``, ``exec argv``) with stdout and stderr sent to files in the sample's
scratch directory; small outputs come back inline, between a random marker, in the
same call, and large ones are left in the files for a download. Every command is POSIX
``sh`` (busybox images included).
"""

from __future__ import annotations

import re
import shlex
import uuid
from dataclasses import dataclass
from typing import Literal

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

INLINE_OUTPUT_BYTES = 16 * 1024
"""stdout + stderr up to this size come back in the exec's own answer."""

INLINE_COMMAND_BYTES = 32 * 1024
"""A longer command is written to a script file and sourced (the worker caps commands)."""


def new_marker() -> str:
    """A marker no output contains by chance, of letters no redaction rule takes for a
    secret (it is not hex, not base64-like)."""
    return "sbx-exec-" + "".join(chr(ord("g") + int(c, 16)) for c in uuid.uuid4().hex)


def inner_command(argv: list[str], cwd: str | None, env: dict[str, str] | None) -> str:
    """``cd``, ``export`` and ``exec argv`` as lines for a subshell.

    Variables are set with the shell's ``export`` (never an ``env`` found on ``PATH``).
    Raises ``ValueError`` for an empty ``argv`` or a variable name a shell cannot take.
    """
    if not argv:
        raise ValueError("exec needs a command")
    lines = []
    if cwd is not None:
        lines.append(f"cd -- {shlex.quote(cwd)} || exit 1")
    for name, value in (env or {}).items():
        if not _NAME.match(name):
            raise ValueError(f"not a variable name a shell can set: {name!r}")
        lines.append(f"export {name}={shlex.quote(value)}")
    lines.append("exec " + shlex.join(argv))
    return "\n".join(lines)


@dataclass(frozen=True)
class ExecFiles:
    """Where one exec's stdin, stdout, stderr (and script, if sourced) live in the sandbox."""

    stdout: str
    stderr: str
    stdin: str | None = None
    script: str | None = None

    @classmethod
    def under(cls, scratch: str, *, stdin: bool, script: bool) -> ExecFiles:
        base = f"{scratch.rstrip('/')}/{uuid.uuid4().hex}"
        return cls(f"{base}.out", f"{base}.err", f"{base}.in" if stdin else None,
                   f"{base}.sh" if script else None)  # fmt: skip


def exec_command(inner: str, files: ExecFiles, marker: str) -> str:
    """The whole command of one exec: run ``inner`` (or its script), then report.

    The answer's output starts with ``<marker> <status> inline`` followed by stdout, a
    line ``<marker>`` and stderr (the files are removed), or is ``<marker> <status>
    spill <stdout bytes> <stderr bytes>`` (the files stay for a download).
    """
    q = shlex.quote
    out, err = q(files.stdout), q(files.stderr)
    body = f"( . {q(files.script)} )" if files.script else f"(\n{inner}\n)"
    stdin = q(files.stdin) if files.stdin else "/dev/null"
    leftovers = " ".join(q(p) for p in (files.stdin, files.script) if p)
    tidy = f"rm -f {leftovers}\n" if leftovers else ""
    return (
        f"{body} < {stdin} > {out} 2> {err}; rc=$?\n"
        f"{tidy}"
        f"o=$(wc -c < {out}); e=$(wc -c < {err})\n"
        f"if [ $((o + e)) -le {INLINE_OUTPUT_BYTES} ]; then\n"
        f"  printf '%s %s inline\\n' {marker} \"$rc\"; cat {out}; printf '\\n%s\\n' {marker}\n"
        f"  cat {err}; rm -f {out} {err}\n"
        f"else printf '%s %s spill %s %s\\n' {marker} \"$rc\" $o $e; fi"
    )


@dataclass(frozen=True)
class ExecReport:
    """What an exec's answer says: its status and, inline, its output."""

    returncode: int
    mode: Literal["inline", "spill"]
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0


class ReportUnreadable(ValueError):
    """The answer does not hold the report the command prints (cut or altered)."""


def parse_report(output: str, marker: str) -> ExecReport:
    """Read :func:`exec_command`'s answer (what the session shell itself printed before
    it, such as a job's ``Terminated``, is skipped). Raises :class:`ReportUnreadable`."""
    start = output.find(f"{marker} ")
    while start > 0 and output[start - 1] != "\n":
        start = output.find(f"{marker} ", start + 1)
    if start < 0:
        raise ReportUnreadable("the exec's report is missing from the answer")
    header, _, rest = output[start:].partition("\n")
    words = header.split()
    if len(words) < 3 or words[0] != marker or not words[1].lstrip("-").isdigit():
        raise ReportUnreadable("the exec's report is missing from the answer")
    status = int(words[1])
    if words[2] == "spill" and len(words) == 5 and words[3].isdigit() and words[4].isdigit():
        return ExecReport(status, "spill", stdout_bytes=int(words[3]), stderr_bytes=int(words[4]))
    separator = f"\n{marker}\n"
    if words[2] != "inline" or separator not in rest:
        raise ReportUnreadable("the exec's output was cut or altered on its way back")
    stdout, _, stderr = rest.partition(separator)
    return ExecReport(status, "inline", stdout=stdout, stderr=stderr)


FileState = Literal["dir", "missing", "denied", "nodir", "ok"]


def read_probe(path: str) -> str:
    """Prints ``dir``, ``missing``, ``denied`` or ``ok <size>`` for a file to be read."""
    return (
        f"f={shlex.quote(path)}; if [ -d \"$f\" ]; then echo dir; "
        'elif [ ! -e "$f" ]; then echo missing; elif [ ! -r "$f" ]; then echo denied; '
        'else echo "ok $(wc -c < "$f")"; fi'
    )


def write_probe(path: str) -> str:
    """Makes the parent directories, then prints ``dir``, ``nodir``, ``denied`` or ``ok``."""
    return (
        f"f={shlex.quote(path)}; d=$(dirname -- \"$f\"); if [ -d \"$f\" ]; then echo dir; "
        'else mkdir -p -- "$d" 2>/dev/null; if [ ! -d "$d" ]; then echo nodir; '
        'elif [ -e "$f" ] && [ ! -w "$f" ]; then echo denied; '
        'elif [ ! -e "$f" ] && [ ! -w "$d" ]; then echo denied; else echo ok; fi; fi'
    )


def parse_probe(output: str) -> tuple[FileState, int]:
    """``(state, size)`` from a probe's output; ``ValueError`` if it is not one."""
    words = output.split()
    if words and words[0] in ("dir", "missing", "denied", "nodir", "ok"):
        size = int(words[1]) if len(words) > 1 and words[1].isdigit() else 0
        return words[0], size  # type: ignore[return-value]
    raise ValueError(f"unexpected answer to a file check: {output[:200]!r}")


def sample_setup(workdir: str | None) -> str:
    """Makes the sample's working and scratch directories, ``cd``s into the working one
    (the session's cwd from then on), and prints: workdir, scratch dir, uid, user name."""
    tmp = '"${TMPDIR:-/tmp}"'
    make = (
        f"w={shlex.quote(workdir)} && mkdir -p -- \"$w\""
        if workdir
        else f"w=$(mktemp -d {tmp}/inspect-XXXXXXXX)"
    )
    return (
        f"{make} && s=$(mktemp -d {tmp}/sbx-io-XXXXXXXX) && cd -- \"$w\" && "
        'printf \'%s\\n\' "$(pwd)" "$s" "$(id -u)" "$(id -un 2>/dev/null || id -u)"'
    )


def sample_teardown(paths: list[str]) -> str:
    """Removes the sample's own directories."""
    return "rm -rf -- " + " ".join(shlex.quote(p) for p in paths)
