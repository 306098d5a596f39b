"""What the conformance checks share: a sandbox per check, calls with a safety timeout,
and waits done by bounded polls inside the sandbox."""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable, Iterator

from environments.base import Environment, ExecResult, SpawnedProcess

Factory = Callable[[str], Environment]
Check = Callable[[Factory], None]


@contextlib.contextmanager
def sandbox(make: Factory, label: str = "conf") -> Iterator[Environment]:
    """A fresh session's sandbox, closed afterwards."""
    env = make(f"{label}-{secrets.token_hex(4)}")
    try:
        yield env
    finally:
        env.close()


def run(env: Environment, command: str, /, **kwargs: object) -> ExecResult:
    """``env.exec`` with a safety timeout, so a broken backend fails instead of hanging."""
    kwargs.setdefault("timeout", 60)
    return env.exec(command, **kwargs)  # type: ignore[arg-type]


def ok(env: Environment, command: str, /, **kwargs: object) -> str:
    """Output of a command that must succeed."""
    result = run(env, command, **kwargs)
    assert result.exit_code == 0, f"{command!r} failed: {result}"
    return result.output


def scratch_dir(env: Environment) -> str:
    """A new empty directory inside the sandbox."""
    return ok(env, "mktemp -d").strip()


def wait_in_sandbox(env: Environment, condition: str, seconds: float = 30.0) -> bool:
    """Poll ``condition`` (a shell test) inside the sandbox until true or ``seconds`` pass."""
    rounds = int(seconds / 0.05)
    script = (
        f'i=0; until {condition}; do i=$((i+1)); [ "$i" -gt {rounds} ] && exit 1; sleep 0.05; done'
    )
    return run(env, script, timeout=seconds + 30).exit_code == 0


def wait_ended(env: Environment, process: SpawnedProcess, seconds: float = 30.0) -> None:
    """Poll ``is_running`` until ``process`` ended or ``seconds`` pass: a sandbox whose
    background processes live in namespaces of their own does not show them in its
    ``/proc``, so the in-sandbox wait alone proves nothing there."""
    deadline = time.monotonic() + seconds
    while env.is_running(process) and time.monotonic() < deadline:
        time.sleep(0.05)


def wait_for_content(env: Environment, path: str, content: bytes, seconds: float = 30.0) -> bool:
    """Poll ``read_file(path)`` from outside the sandbox until it is ``content`` or
    ``seconds`` pass: for waits that no call may run through."""
    deadline = time.monotonic() + seconds
    while env.read_file(path) != content:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def count_processes(env: Environment, needle: str) -> int:
    """Processes in the sandbox whose command line contains ``needle`` (zombies excluded)."""
    # The [x] trick keeps this scan's own command line from matching itself.
    pattern = f"{needle[:-1]}[{needle[-1]}]"
    out = ok(
        env,
        "for f in /proc/[0-9]*/cmdline; do "
        "{ tr '\\000' ' ' < \"$f\"; } 2>/dev/null; echo; done | "
        f"grep -c '{pattern}' || true",
    )
    return int(out.strip() or 0)
