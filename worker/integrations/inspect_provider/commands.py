"""The shell commands the ``sbx`` sandbox sends through ``terminal``, and how answers are read.

inspect's contract asks for things the ``terminal`` tool does not do itself: stdout and
stderr apart, standard input, per-call cwd and variables that do not stick to the
session, exact errors for files. Each exec therefore runs its command in a subshell
(``cd``, ``export``, ``exec argv``) with stdout and stderr sent to files in the sample's
scratch directory, printed back between random markers in the same call; output the
worker cuts on its way back (its output limit) is read whole from the files. Every
command is POSIX ``sh`` (busybox images included).
"""

from __future__ import annotations

import re
import shlex
import uuid
from dataclasses import dataclass
from typing import Literal

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

INLINE_COMMAND_BYTES = 32 * 1024
"""A longer command is written to a script file and sourced (the worker caps commands)."""


def new_marker() -> str:
    """A marker no output contains by chance, of letters no redaction rule takes for a
    secret (it is not hex, not base64-like)."""
    return "sbx-exec-" + "".join(chr(ord("g") + int(c, 16)) for c in uuid.uuid4().hex)


def reject_nul(*texts: str) -> None:
    """``ValueError("embedded null byte")`` when any of ``texts`` holds a NUL byte.

    No command line or path can carry one. The message is CPython's own (``subprocess``,
    ``open``), which inspect maps to a parsing error the model reads; anything else
    (the worker's refusal, an ``OSError``) would fail the sample or call the sandbox
    unavailable."""
    if any("\0" in text for text in texts):
        raise ValueError("embedded null byte")


def inner_command(argv: list[str], cwd: str | None, env: dict[str, str] | None) -> str:
    """``cd``, ``export`` and ``exec argv`` as lines for a subshell.

    Variables are set with the shell's ``export`` (never an ``env`` found on ``PATH``).
    Raises ``ValueError`` for an empty ``argv``, a variable name a shell cannot take,
    or a NUL byte anywhere (:func:`reject_nul`).
    """
    if not argv:
        raise ValueError("exec needs a command")
    reject_nul(*argv, cwd or "", *(env or {}).keys(), *(env or {}).values())
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
    """One exec's files in the sample's scratch directory: stdin, script, stdout, stderr
    and the separator between them. A set is reused by later execs (each ``>`` starts
    it afresh), so nothing needs removing between execs."""

    base: str

    def path(self, kind: Literal["in", "sh", "out", "err", "sep"]) -> str:
        return f"{self.base}.{kind}"


class ExecFilesPool:
    """File sets of a sample: taken by an exec, given back when it no longer needs them;
    two execs running at once never share one."""

    def __init__(self, scratch: str) -> None:
        self.scratch = scratch.rstrip("/")
        self._free: list[ExecFiles] = []

    def take(self) -> ExecFiles:
        return self._free.pop() if self._free else ExecFiles(f"{self.scratch}/{uuid.uuid4().hex}")

    def give(self, files: ExecFiles) -> None:
        self._free.append(files)


def exec_command(inner: str, files: ExecFiles, marker: str, *, stdin: bool, script: bool) -> str:
    """The whole command of one exec: run ``inner`` (or the script holding it), then print
    ``marker``, stdout, a separator line ``marker``, stderr and ``marker <status>``.

    Two processes besides the command's own (its subshell and one ``cat``). What the
    session shell itself says about the subshell (a job's ``Terminated``) comes before
    the first marker and is no part of the output. (No ``{ ...; } 2>/dev/null`` around
    it: busybox ash then drops the subshell's own redirections.)
    """
    q = shlex.quote
    out, err, sep = q(files.path("out")), q(files.path("err")), q(files.path("sep"))
    body = f"( . {q(files.path('sh'))} )" if script else f"(\n{inner}\n)"
    source = q(files.path("in")) if stdin else "/dev/null"
    return (
        f"{body} < {source} > {out} 2> {err}; rc=$?\n"
        f"printf '\\n%s\\n' {marker} > {sep}; printf '%s\\n' {marker}; cat {out} {sep} {err}\n"
        f"printf '\\n%s %s\\n' {marker} \"$rc\""
    )


@dataclass(frozen=True)
class ExecReport:
    """What an exec's answer says: its status and output (``complete`` False: the output
    was cut on its way back, the files hold all of it)."""

    returncode: int
    stdout: str = ""
    stderr: str = ""
    complete: bool = True


class ReportUnreadable(ValueError):
    """The answer does not hold the report the command prints (cut or altered)."""


def parse_report(output: str, marker: str, *, truncated: bool) -> ExecReport:
    """Read :func:`exec_command`'s answer (``truncated``: the worker kept only its head
    and tail). Raises :class:`ReportUnreadable`."""
    end = output.rfind(f"\n{marker} ")
    status = output[end + len(marker) + 2 :].strip() if end >= 0 else ""
    if not status.lstrip("-").isdigit():
        raise ReportUnreadable("the exec's report is missing from the answer")
    if truncated:
        return ExecReport(int(status), complete=False)
    start = output.find(f"{marker}\n")
    while start > 0 and output[start - 1] != "\n":
        start = output.find(f"{marker}\n", start + 1)
    separator = f"\n{marker}\n"
    body = output[start + len(marker) + 1 : end] if start >= 0 else ""
    if start < 0 or separator not in body:
        raise ReportUnreadable("the exec's output was altered on its way back")
    stdout, _, stderr = body.partition(separator)
    return ExecReport(int(status), stdout=stdout, stderr=stderr)


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
