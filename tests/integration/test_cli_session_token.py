"""``sbx session token`` on a fresh home: embedded mode creates the key (0600) and says so,
and a worker started afterwards verifies the token; a remote broker keeps the clear error."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from tests.integration.test_cli import sbx


def test_fresh_embedded_home_creates_the_key_and_the_token_verifies(
    sbx_home: Path, start_worker: Any
) -> None:
    key = sbx_home / "secret.key"
    assert not key.exists()
    p = sbx(sbx_home, None, "session", "token", "fresh-1")
    assert p.returncode == 0, p.stderr
    token = p.stdout.strip()
    assert token and "\n" not in token
    assert f"created the secret key {key}" in p.stderr
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(sbx_home.stat().st_mode) & 0o077 == 0

    again = sbx(sbx_home, None, "session", "token", "fresh-1", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {"session_id": "fresh-1", "token": token}
    assert again.stderr == ""  # the key exists now: nothing is created, nothing said

    start_worker(None)  # uses the key the CLI created
    p = sbx(sbx_home, None, "exec", "--", "echo verified",
            SBX_SESSION_ID="fresh-1", SBX_SESSION_TOKEN=token)  # fmt: skip
    assert (p.returncode, p.stdout) == (0, "verified\n"), p.stderr


def test_remote_broker_without_a_key_is_a_clear_error(sbx_home: Path) -> None:
    # Nothing listens there, and nothing needs to: no key, no token, no connection.
    p = sbx(sbx_home, "redis://127.0.0.1:9/0", "session", "token", "remote-1")
    assert p.returncode == 3
    assert p.stdout == ""
    assert "no secret key here" in p.stderr and "SBX_SECRET_KEY" in p.stderr
    assert p.stderr.count("\n") == 1
    assert not (sbx_home / "secret.key").exists()
