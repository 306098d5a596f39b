"""Attacks run from inside a real ``terminal`` call, as a model's command would run them.

:func:`in_sandbox` runs a Python attack script through a real worker's
``terminal`` tool and parses the one JSON line it prints (``{"reached":
false}`` when the sandbox could not reach what it attacks: a jailed local
backend hides ``SBX_HOME`` and the ledger). The tests then assert what sbx's
own checks guarantee (a forged result dropped by the client, a grant without
a seal ignored, a forged receipt reported by verify) and, where the sandbox
was kept away, run the very same script outside it (:func:`attack`), as a
sandbox that could reach the ledger would: the check must hold either way.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers import REPO
from worker.client import SandboxClient

PRELUDE = """
import json, sys
ARGS = json.loads({args!r})
def report(**fields):
    print(json.dumps(fields))
    sys.exit(0)
def ledger():
    from worker.broker.connection import redis_client
    try:
        client = redis_client(ARGS["ledger"])
        client.ping()
    except Exception:
        report(reached=False)
    return client
def client_settings():
    # A home of its own: no key to mint anything with (a jailed sandbox sees none either).
    import tempfile
    from worker.settings import Settings
    return Settings(home=tempfile.mkdtemp(), broker_url=ARGS["broker"],
                    ledger_url=ARGS["ledger"])
"""


def script(body: str, **args: Any) -> str:
    """The attack ``body`` with ``ARGS`` (``args``) and ``report(**fields)`` defined."""
    return PRELUDE.format(args=json.dumps(args)) + body


def in_sandbox(client: SandboxClient, code: str, timeout: int = 120) -> dict[str, Any]:
    """Run ``code`` in ``client``'s sandbox through a real ``terminal`` call.

    Returns the JSON its last output line holds; ``{"reached": False}`` when the
    interpreter or what it imports is not there (a jail that hides the host).
    """
    command = f"PYTHONPATH={REPO} {sys.executable} -c {shlex.quote(code)}"
    result = json.loads(client.tool_call("terminal", {"command": command, "timeout": timeout}))
    lines = [line for line in (result.get("output") or "").splitlines() if line.startswith("{")]
    if result.get("exit_code") != 0 or not lines:
        return {"reached": False, "answer": result}
    parsed: dict[str, Any] = json.loads(lines[-1])
    return parsed


def outside(code: str, timeout: int = 120) -> dict[str, Any]:
    """Run ``code`` in a local subprocess (a sandbox that could reach everything)."""
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    parsed: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return parsed


def attack(client: SandboxClient, code: str) -> dict[str, Any]:
    """``code`` from inside the sandbox, or, where the sandbox could not reach its target,
    from outside it: the defence under test must hold in both cases."""
    result = in_sandbox(client, code)
    if result.get("reached"):
        return result
    answer = result.get("answer") or {}
    # Refused by the approval guard is not "kept away": the attack must run.
    assert answer.get("status") not in ("approval_required", "blocked", "denied"), answer
    return {**outside(code), "from_outside": True}


def ledger_urls(home: Path, broker_url: str | None) -> tuple[str, str]:
    """The broker and ledger URLs a client of ``home`` uses (the embedded one when None)."""
    from worker.broker.connection import resolve_broker_url, resolve_ledger_url
    from worker.settings import Settings

    settings = Settings(home=home, broker_url=broker_url)
    broker = resolve_broker_url(settings)
    return broker, resolve_ledger_url(settings, broker)
