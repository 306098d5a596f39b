"""The pty relay: the stdlib-only Python program that holds a background process's
pseudo-terminal, so the process keeps its terminal when the worker that started it
goes (see :mod:`environments.backends.local.pty` for its contract). The local backend
runs it on the host or in its jail; remote backends run it inside the sandbox with
the image's ``python3`` (:mod:`environments.shell.pty_helper`).
"""

from __future__ import annotations

RELAY = r"""
import fcntl, os, select, signal, sys, termios
out_path, status_path, in_path, cmd, ready = sys.argv[1:6]
sigs = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGTTOU)
for s in sigs:
    signal.signal(s, signal.SIG_IGN)
try:
    os.setsid()
except OSError:
    pass
master, slave = os.openpty()
fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
os.mkfifo(in_path, 0o600)
fifo = os.open(in_path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
out = os.open(out_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
pid = os.fork()
if pid == 0:
    for s in signal.valid_signals():
        try:
            signal.signal(s, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    for fd in (0, 1, 2):
        os.dup2(slave, fd)
    os.closerange(3, 65536)
    os.execv("/bin/sh", ["sh", "-c", cmd])
os.close(slave)
os.write(int(ready), b".")
os.close(int(ready))
def pull(fd):
    try:
        return os.read(fd, 65536)
    except OSError:  # nothing there (the FIFO), or the terminal closed (EIO)
        return b""
open_master = True
while open_master:
    try:
        ready, _, _ = select.select([master, fifo], [], [])
    except InterruptedError:
        continue
    data = pull(fifo) if fifo in ready else b""
    if data:
        try:
            os.write(master, data)
        except OSError:
            pass
    if master in ready:
        data = pull(master)
        if data:
            os.write(out, data)
        else:
            open_master = False
_, st = os.waitpid(pid, 0)
code = os.waitstatus_to_exitcode(st)
code = code if code >= 0 else 128 - code
try:
    os.unlink(in_path)
except OSError:
    pass
tmp = status_path + ".tmp"
with open(tmp, "w") as f:
    f.write(str(code))
os.replace(tmp, status_path)
"""
"""Args: ``OUTPUT STATUS INPUT_FIFO COMMAND READY_FD``. Leads its own session (when it
does not yet), starts COMMAND on a new pty with every signal at its default disposition
and none blocked (not Python's ignored SIGPIPE and SIGXFSZ, nor the relay's own: an
ignored signal survives ``exec``), writes one byte to READY_FD once the FIFO is open and
the command forked, appends the terminal's output to OUTPUT, feeds the FIFO's bytes to
the terminal, and writes the exit status (128+N for signal N) to STATUS."""


class InputUnavailable(OSError):
    """The process takes no input now (it has ended, or it was not started on a pty)."""


def input_path_for(output_path: str) -> str:
    """Where the input FIFO of the process whose output goes to ``output_path`` lives."""
    base = output_path[: -len(".out")] if output_path.endswith(".out") else output_path
    return base + ".in"
