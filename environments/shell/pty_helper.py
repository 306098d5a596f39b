"""Background processes on a pseudo-terminal inside a remote sandbox.

The pty relay (:mod:`environments.pty_relay`) runs in the sandbox with the image's
``python3``, detached, so the process keeps its terminal when the worker that started
it goes, and any worker reads its output and status files and types into its input
FIFO. An image without ``python3`` gets :class:`~environments.errors.Unsupported`.
"""

from __future__ import annotations

from typing import ClassVar

from environments.base import SpawnedProcess
from environments.errors import SandboxError, Unsupported
from environments.pty_relay import RELAY, InputUnavailable, input_path_for
from environments.shell.helper import HelperOps, spawn_script
from environments.shell.helper_answers import exports

PTY_SPAWN = spawn_script(
    check='command -v python3 >/dev/null 2>&1 || { echo sbx-no-python; exit 46; }\n',
    start=r"""
in=$6
rm -f "$in" "$out.ready"
mkfifo -m 600 "$out.ready" 2>/dev/null || { echo sbx-no-output; exit 45; }
python3 -I -c "$7" "$out" "$st" "$in" "$cmd" 3 3>"$out.ready" </dev/null >/dev/null 2>&1 &
pid=$!
# The relay writes one byte (then closes) once its FIFO is open and the command forked;
# EOF with nothing read means it died first.
IFS= read -r ok < "$out.ready"
rm -f "$out.ready"
[ "$ok" = . ] || { echo sbx-no-relay; exit 47; }
mode=setsid
""",
)
"""Args: ``WORKDIR COMMAND OUTPUT STATUS EXPORTS INPUT_FIFO RELAY``. Starts the relay (which
leads its own session) running COMMAND on a pty; prints as :data:`SPAWN` does."""

PTY_INPUT = r"""
import errno, os, stat, sys
data = sys.stdin.buffer.read()
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
except FileNotFoundError:
    sys.exit(2)
except OSError as exc:
    sys.exit(3 if exc.errno == errno.ENXIO else 4)
st = os.fstat(fd)
if not stat.S_ISFIFO(st.st_mode) or st.st_uid != os.getuid():
    sys.exit(4)
view, written = memoryview(data), 0
while view:
    try:
        n = os.write(fd, view)
    except BlockingIOError:
        print(written)
        sys.exit(5)
    written += n
    view = view[n:]
print(written)
"""
"""Args: ``INPUT_FIFO``; stdin: the bytes to type. Prints the bytes written; exit 2: no
FIFO, 3: no relay reads it, 4: not a private FIFO, 5: its buffer filled (partly written)."""

_INPUT_ERRORS = {
    2: "the process has no terminal input (ended, or not pty)",
    3: "the process is not reading input any more",
    4: "the process's input is not a private FIFO",
}


class HelperPtyOps(HelperOps):
    """:class:`HelperOps` plus ``spawn_on_pty``/``write_input`` through the in-sandbox relay."""

    supports_pty: ClassVar[bool] = True

    def spawn_on_pty(
        self,
        command: str,
        *,
        output_path: str,
        status_path: str,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
    ) -> SpawnedProcess:
        run_env, cwd = self._spawn_context(workdir, env)
        pty_env = exports({"TERM": "xterm", **run_env})
        args = [cwd, command, output_path, status_path, pty_env, input_path_for(output_path)]
        code, out = self._helper(PTY_SPAWN, [*args, RELAY])
        if code == 46:
            raise Unsupported(
                f"pty processes need python3 in {self.where}'s image (it runs the terminal's "
                "relay); start it without pty"
            )
        if code == 47:
            raise SandboxError(
                f"the pty relay did not start in {self.where} (no pseudo-terminals there?)"
            )
        return self._spawned(code, out, cwd, output_path, status_path, "pty process")

    def write_input(self, process: SpawnedProcess, data: bytes) -> int:
        """Raises :class:`~environments.pty_relay.InputUnavailable` when the process takes
        no input (ended, not on a pty, or its input buffer is full)."""
        fifo = input_path_for(process.output_path)
        code, out = self._helper(
            "exec python3 -I -c \"$1\" \"$2\"", [PTY_INPUT, fifo], stdin=data
        )
        if code in _INPUT_ERRORS:
            raise InputUnavailable(_INPUT_ERRORS[code])
        written = out.decode(errors="replace").strip()
        if code == 5:
            raise InputUnavailable(
                f"the process's input buffer is full ({written} bytes were sent)"
            )
        if code != 0 or not written.isdigit():
            raise InputUnavailable(f"no terminal input in {self.where} (python3 answered {code})")
        return int(written)
