"""POSIX ``sh`` helpers that remote backends run inside their sandboxes.

The docker, ssh and apptainer backends cannot reach the sandbox's processes
with ``os.kill`` or read its ``/proc`` directly; they run these small scripts
there instead (``sh -c SCRIPT sbx ARG...``) through a second, short-lived
exec/channel. They use only builtins plus ``cat``/``tail``/``head``/``mv``/
``setsid``/``stat``, so they work with busybox as well as with coreutils.
Bounding output files on disk needs util-linux ``fallocate`` (``--punch-hole``);
busybox's has no such option, and :data:`TRIM_HEAD` then says so (``no``).
"""

from __future__ import annotations

import time

from environments.base import OUTPUT_ALIGN, HeadTrim, ShellIdentity, SpawnedProcess
from environments.errors import NotRegularFile, SandboxDead, SandboxError, WorkdirNotFound
from environments.shell.driver import SessionShell
from environments.shell.helper_answers import (
    exports,
    parse_spawn_output,
    parse_stat,
)
from environments.shell.helper_tree import KILL_TREE as KILL_TREE
from environments.shell.helper_tree import kill_tree as kill_tree

_STAT_ATTEMPTS = 3
"""Times a pid's state is asked before an answer that is neither alive nor gone raises."""
_STALE_GONE_S = 5.0
"""How long the tree of an ended stale shell is waited for to be gone."""


def spawn_script(start: str, check: str = "") -> str:
    """A script with the args ``WORKDIR COMMAND OUTPUT STATUS EXPORTS [MORE...]``: it
    exports EXPORTS, runs ``check`` (a refusal before anything is made), enters WORKDIR
    (else exit 44), creates OUTPUT 0600 (else exit 45), then runs ``start``, which starts
    COMMAND detached and sets ``pid`` and ``mode``; it prints ``sbx-spawn MODE PID`` and
    ``sbx-stat <the pid's /proc stat line>``."""
    return (
        'wd=$1; cmd=$2; out=$3; st=$4\neval "$5"\n' + check
        + 'cd -- "$wd" 2>/dev/null || { echo sbx-no-workdir; exit 44; }\n'
        + '{ : >>"$out" && chmod 600 "$out"; } 2>/dev/null || { echo sbx-no-output; exit 45; }\n'
        + start
        + '{ read -r s < /proc/$pid/stat; } 2>/dev/null || s=\'\'\n'
        + 'echo "sbx-spawn $mode $pid"\necho "sbx-stat $s"\n'
    )  # fmt: skip


SPAWN = spawn_script(r"""
w='sh -c "$1" </dev/null; rc=$?; printf %s "$rc" > "$2.tmp" && mv -f "$2.tmp" "$2"'
if command -v setsid >/dev/null 2>&1; then
  mode=setsid
  setsid sh -c "$w" sbx-process "$cmd" "$st" </dev/null >>"$out" 2>&1 &
else
  mode=job
  set -m 2>/dev/null
  sh -c "$w" sbx-process "$cmd" "$st" </dev/null >>"$out" 2>&1 &
fi
pid=$!
""")
"""Args: ``WORKDIR COMMAND OUTPUT STATUS EXPORTS``. Starts COMMAND detached (own session when
``setsid`` exists) with output appended to OUTPUT and its exit status written atomically to
STATUS. Prints ``sbx-spawn MODE PID`` and ``sbx-stat <the pid's /proc stat line>``."""

BOOT_ID = r"""
cat /proc/sys/kernel/random/boot_id 2>/dev/null
"""

STAT = r"""
{ read -r s < /proc/$1/stat; } 2>/dev/null || { echo sbx-gone; exit 0; }
echo "sbx-stat $s"
"""
"""Args: ``PID``. Prints the pid's ``/proc`` stat line, or ``sbx-gone``."""

SIGNAL = r"""
if { read -r s < /proc/$1/stat; } 2>/dev/null; then
  r=${s##*) }
  set -- "$@" $r
  # $5 = state (field 3), $24 = start time (field 22).
  eval "t=\${24}"
  if [ "$5" != Z ] && [ -n "$3" ] && [ "$t" != "$3" ]; then echo sbx-reused; exit 0; fi
fi
kill -"$4" -"$2" 2>/dev/null && { echo sbx-signalled; exit 0; }
echo sbx-gone
"""
"""Args: ``PID PGID START_TIME SIGNUM`` (START_TIME may be empty). Signals the group PGID
unless PID is alive with another start time (reused); with the leader gone, the group
id can only still be held by the process's own members."""

READ_FILE = r"""
[ -e "$1" ] || exit 44
[ -d "$1" ] && exit 45
[ -f "$1" ] || exit 47
[ -r "$1" ] || exit 46
if [ -z "$3" ]; then tail -c +"$(( $2 + 1 ))" -- "$1"
else tail -c +"$(( $2 + 1 ))" -- "$1" | head -c "$3"; fi
"""
"""Args: ``PATH OFFSET [LIMIT]``. Writes the file's bytes from OFFSET to stdout. Only a
regular file is opened (47 otherwise): opening a FIFO the sandbox made would block the
helper, and the worker thread waiting on it, until something writes to it."""

_SIZE = r"""
size() { s=$(stat -c %s -- "$1" 2>/dev/null) || s=$(( $(wc -c < "$1") )); echo "$s"; }
boundary() {  # discard_boundary SIZE CAP ALIGN (environments/base.py), in sh arithmetic
  b=0
  if [ "$2" -gt 0 ] && [ "$1" -gt "$2" ]; then
    b=$(( ($1 - $2 + $3 - 1) / $3 * $3 )); [ "$b" -gt "$1" ] && b=$1
  fi
  echo "$b"
}
"""

TRIM_HEAD = (
    _SIZE
    + r"""
f=$1; cap=$2; al=$3
[ -f "$f" ] || exit 44
size=$(size "$f"); cut=$(boundary "$size" "$cap" "$al")
# A shell with busybox applets built in may run its own fallocate (no -p) before PATH's:
# try util-linux by its usual paths too.
punch() {
  for fa in fallocate /usr/bin/fallocate /usr/local/bin/fallocate; do
    "$fa" -p -o 0 -l "$2" -- "$1" 2>/dev/null && return 0
  done
  return 1
}
ok=unknown
if [ "$cut" -gt 0 ]; then
  if punch "$f" "$cut"; then ok=yes; else ok=no; cut=0; fi
elif [ "$4" = probe ]; then
  t="$f.sbx-probe.$$"
  if : > "$t" 2>/dev/null && punch "$t" "$al"; then ok=yes; else ok=no; fi
  rm -f -- "$t"
fi
echo "sbx-trim $size $cut $ok"
"""
)
"""Args: ``PATH CAP ALIGN [probe]``. Punches a hole over the head of PATH (see
``discard_boundary``), keeping its size. Prints ``sbx-trim SIZE DISCARDED yes|no|unknown``
(``no``: no ``fallocate --punch-hole`` here; ``unknown``: nothing to do, no probe)."""

READ_OUTPUT = (
    _SIZE
    + r"""
f=$1; lim=$3
[ -e "$f" ] || exit 44
[ -d "$f" ] && exit 45
[ -f "$f" ] || exit 47
[ -r "$f" ] || exit 46
start=$(boundary "$(size "$f")" "$4" "$5"); [ "$2" -gt "$start" ] && start=$2
[ "$lim" -gt 0 ] && tail -c +"$(( start + 1 ))" -- "$f" | head -c "$lim"
printf '\nsbx-window %s %s\n' "$start" "$(size "$f")"
"""
)
"""Args: ``PATH OFFSET LIMIT CAP ALIGN``. Writes at most LIMIT bytes of PATH from OFFSET or
the discard boundary, whichever is later, then ``\nsbx-window START SIZE\n`` (SIZE measured
after the read)."""

WRITE_FILE = r"""
d=$(dirname -- "$1")
[ -d "$d" ] || exit 44
t="$1.sbx-tmp.$$"
cat > "$t" || { rm -f "$t"; exit 46; }
mv -f -- "$t" "$1" || exit 46
"""
"""Args: ``PATH``. Replaces PATH atomically with stdin."""

FILE_ERRORS: dict[int, type[OSError]] = {
    44: FileNotFoundError,
    45: IsADirectoryError,
    46: PermissionError,
    47: NotRegularFile,  # a FIFO, socket or device: never opened (it could block)
}


class HelperOps:
    """spawn/is_running/signal/read_file/write_file for backends that reach the sandbox only
    by running :data:`SPAWN`, :data:`STAT`... there through ``_helper``.

    Mixed into an :class:`~environments.base.Environment` that has a ``shell``
    (:class:`~environments.shell.driver.SessionShell`) and implements ``_helper``.
    """

    shell: SessionShell
    where: str = "the sandbox"
    can_punch_holes = True
    dead_means_ended = True
    """A :class:`SandboxDead` from ``_helper`` means the sandbox (and every process in it)
    ended: a removed container, a stopped cloud sandbox. False for a host reached over the
    network (ssh), where it only means the host cannot be reached now: its processes run
    on, and must not be taken for ended."""
    helper_deadline = 120.0
    """Seconds a helper command may take before it is given up (a blocked read, say)."""

    def _helper(
        self, script: str, args: list[str], stdin: bytes | None = None
    ) -> tuple[int, bytes]:
        """Run ``sh -c SCRIPT sbx ARGS...`` in the sandbox; ``(exit status, stdout)``.

        Raises :class:`~environments.errors.SandboxDead` when the sandbox is gone,
        :class:`~environments.errors.ServiceUnreachable` when no answer came within
        :attr:`helper_deadline` (the command may still run)."""
        raise NotImplementedError

    def spawn(
        self,
        command: str,
        *,
        output_path: str,
        status_path: str,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
    ) -> SpawnedProcess:
        run_env, cwd = self._spawn_context(workdir, env)
        code, out = self._helper(SPAWN, [cwd, command, output_path, status_path, exports(run_env)])
        return self._spawned(code, out, cwd, output_path, status_path, "background process")

    def _spawn_context(
        self, workdir: str | None, env: dict[str, str] | None
    ) -> tuple[dict[str, str], str]:
        """A spawned process's environment and cwd: the session's (its shell started for
        them when it has not run yet) unless overridden."""
        if not self.shell.alive and not self.shell.cwd:
            self.shell.start()
        return {**self.shell.env, **(env or {})}, workdir or self.shell.cwd

    def _spawned(
        self, code: int, out: bytes, cwd: str, output_path: str, status_path: str, what: str
    ) -> SpawnedProcess:
        """The process a spawn script named; ``WorkdirNotFound`` (44), ``PermissionError``
        (45) and ``SandboxError`` (none named)."""
        if code == 44:
            raise WorkdirNotFound(f"workdir does not exist: {cwd} (nothing was run)")
        if code == 45:
            raise PermissionError(f"cannot write {output_path} in {self.where}")
        parsed = parse_spawn_output(out.decode(errors="replace"))
        if parsed is None:
            raise SandboxError(f"{what} did not start: {out[-500:]!r}")
        pid, pgid, start = parsed
        return SpawnedProcess(
            pid=pid, pgid=pgid, start_time=start, output_path=output_path, status_path=status_path
        )

    def _stat(self, pid: int) -> tuple[str, int, int] | None:
        """``(state, pgid, start time)`` of ``pid`` in the sandbox; None when it is gone.

        Only the helper's own word (or a gone sandbox) says gone: an answer that is
        neither (an exec whose output was lost under load) is asked again, then raises
        :class:`~environments.errors.SandboxError` -- never taken for an ended process.
        An unreachable sandbox that may still run (see :attr:`dead_means_ended`) raises
        :class:`SandboxDead`: the caller asks again later."""
        text = ""
        for _ in range(_STAT_ATTEMPTS):
            try:
                _, out = self._helper(STAT, [str(pid)])
            except SandboxDead:
                if self.dead_means_ended:
                    return None
                raise
            text = out.decode(errors="replace").strip()
            if text == "sbx-gone":
                return None
            if text.startswith("sbx-stat "):
                stat = parse_stat(text.removeprefix("sbx-stat "))
                if stat is not None:
                    return stat
        raise SandboxError(f"no answer about pid {pid} in {self.where}: {text[-200:]!r}")

    def is_running(self, process: SpawnedProcess) -> bool:
        stat = self._stat(process.pid)
        if stat is None or stat[0] == "Z":
            return False
        return process.start_time is None or stat[2] == process.start_time

    def boot_id(self) -> str | None:
        cached: str | None = getattr(self, "_boot_id", None)
        if cached is None:
            try:
                _, out = self._helper(BOOT_ID, [])
            except SandboxError:
                return None
            cached = out.decode(errors="replace").strip() or None
            self._boot_id = cached
        return cached

    def end_stale_shell(self, shell: ShellIdentity) -> bool:
        if self.shell.alive and self.shell.shell_pid == shell.pid:
            return False  # that is this worker's own shell
        stat = self._stat(shell.pid)
        if stat is None or (shell.start_time is not None and stat[2] != shell.start_time):
            return False  # gone, or the pid is another process now: never signal it
        # The session's next command runs once nothing of that shell is left: a probe
        # until the KILLed tree is gone (zombies count as gone), at most a few seconds.
        seen: dict[int, set[int]] = {}
        deadline = time.monotonic() + _STALE_GONE_S
        try:
            kill_tree(self._helper, seen, shell.pid, 9)
            while time.monotonic() < deadline:
                kill_tree(self._helper, seen, shell.pid, 0)
        except ProcessLookupError:
            pass
        except SandboxError:
            return False
        return True

    def signal(self, process: SpawnedProcess, signum: int) -> bool:
        start = "" if process.start_time is None else str(process.start_time)
        try:
            _, out = self._helper(SIGNAL, [str(process.pid), str(process.pgid), start, str(signum)])
        except SandboxDead:
            return False
        return out.strip() == b"sbx-signalled"

    def read_file(self, path: str, offset: int = 0, limit: int | None = None) -> bytes:
        args = [path, str(offset), "" if limit is None else str(limit)]
        code, out = self._helper(READ_FILE, args)
        if code in FILE_ERRORS:
            raise FILE_ERRORS[code](f"{path} (in {self.where})")
        if code != 0:
            raise SandboxError(f"reading {path} failed with status {code}")
        return out

    def trim_output_head(self, path: str, cap: int, *, probe: bool = False) -> HeadTrim:
        args = [path, str(cap), str(OUTPUT_ALIGN), "probe" if probe else ""]
        code, out = self._helper(TRIM_HEAD, args)
        if code in FILE_ERRORS:
            raise FILE_ERRORS[code](f"{path} (in {self.where})")
        parts = out.decode(errors="replace").split()
        if code != 0 or len(parts) != 4 or parts[0] != "sbx-trim":
            raise SandboxError(f"trimming {path} failed with status {code}: {out[-200:]!r}")
        supported = {"yes": True, "no": False}.get(parts[3])
        return HeadTrim(size=int(parts[1]), discarded=int(parts[2]), supported=supported)

    def _read_output_once(
        self, path: str, offset: int, limit: int, cap: int
    ) -> tuple[bytes, int, int]:
        args = [path, str(offset), str(limit), str(cap), str(OUTPUT_ALIGN)]
        code, out = self._helper(READ_OUTPUT, args)
        if code in FILE_ERRORS:
            raise FILE_ERRORS[code](f"{path} (in {self.where})")
        data, sep, trailer = out.rpartition(b"\nsbx-window ")
        fields = trailer.split()
        if code != 0 or not sep or len(fields) != 2 or not all(f.isdigit() for f in fields):
            raise SandboxError(f"reading {path} failed with status {code}")
        return data, int(fields[0]), int(fields[1])

    def write_file(self, path: str, data: bytes) -> None:
        code, _ = self._helper(WRITE_FILE, [path], stdin=data)
        if code in FILE_ERRORS:
            raise FILE_ERRORS[code](f"{path} (in {self.where})")
        if code != 0:
            raise SandboxError(f"writing {path} failed with status {code}")
