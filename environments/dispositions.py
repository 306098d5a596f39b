"""Signals ignored by the host are not passed on to the processes sbx starts.

An ignored signal survives fork and exec, so a host process started under ``nohup``
(SIGHUP ignored) or by a shell script's ``&`` (SIGINT and SIGQUIT ignored) would start
every session shell and command with those signals ignored: ``kill -HUP`` would not
end a command, nor SIGALRM a program that relies on its default. A signal with a
handler is reset to its default on exec instead, which is what this module uses.
"""

from __future__ import annotations

import signal
from types import FrameType

_PYTHON_OWN = frozenset({signal.SIGPIPE, signal.SIGXFSZ})
"""Ignored by Python itself at start; ``subprocess`` restores them for its children."""

_DEFAULT_DOES_NOTHING = frozenset({signal.SIGCHLD, signal.SIGCONT, signal.SIGURG,
                                   signal.SIGWINCH})  # fmt: skip
"""Signals whose default action leaves the process as it is: set to the default itself
(an ignored SIGCHLD also has the kernel reap children, which breaks waiting for them)."""


def _still_ignored(signum: int, frame: FrameType | None) -> None:
    """Stands in for an inherited SIG_IGN: this process goes on ignoring the signal."""


def pass_on_default_dispositions() -> list[str]:
    """Replace every signal this process inherited as ignored (Python's own SIGPIPE and
    SIGXFSZ aside) with a handler that does nothing, or with the default where the
    default leaves the process alone: this process goes on as before, and processes it
    starts from now on get every signal at its default.

    Returns the names of the signals changed, in signal order (none when nothing was
    ignored; ``signal N`` for one without a name, a realtime signal). Call
    it from the main thread; raises ``ValueError`` from any other thread.
    """
    changed: list[str] = []
    for signum in sorted(signal.valid_signals()):
        if signum in _PYTHON_OWN or signum in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                continue
            to = signal.SIG_DFL if signum in _DEFAULT_DOES_NOTHING else _still_ignored
            signal.signal(signum, to)
        except OSError:  # a signal reserved by the C library (the realtime ones it uses)
            continue
        changed.append(_name(signum))
    return changed


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
