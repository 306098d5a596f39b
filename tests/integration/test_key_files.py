"""Key files under ``SBX_HOME`` that someone else could have read or chosen are refused,
by the worker before anything starts and by the CLI, with the file and the fix named.

A key another local user can read lets them mint a token for any session; one they can
write (or a file they own, planted in the keyring) lets them choose the key. Before, such
files were used as they were.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from process_registry.tokens.keyring import KeyringStore, load_or_create_secret
from tests.fixtures_workers import sbx
from worker.broker.embedded import EmbeddedBroker

NOBODY = 65534


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o620, 0o606])
def test_a_worker_does_not_start_on_a_key_open_to_other_users(
    sbx_home: Path, mode: int
) -> None:
    key = sbx_home / "secret.key"
    load_or_create_secret(key)
    os.chmod(key, mode)
    refused = sbx(sbx_home, "worker")
    assert refused.returncode != 0, refused.stderr
    assert f"key file {key} is open to other users (mode {mode:04o})" in refused.stderr
    assert "chmod 600" in refused.stderr and "sbx keys rotate" in refused.stderr
    assert not EmbeddedBroker(sbx_home).ping(), "something started before the refusal"
    token = sbx(sbx_home, "session", "token", "s1")
    assert (token.returncode, token.stdout) != (0, ""), token
    assert f"key file {key} is open to other users" in token.stderr
    os.chmod(key, 0o600)
    fixed = sbx(sbx_home, "session", "token", "s1")
    assert fixed.returncode == 0 and fixed.stdout.startswith("sbx2."), fixed.stderr


def test_a_key_planted_in_the_keyring_by_another_user_is_refused(sbx_home: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("planting a file as another user needs root")
    load_or_create_secret(sbx_home / "secret.key")
    planted = KeyringStore(sbx_home).add(b"p" * 32)  # made 0600 by this user...
    path = sbx_home / "keys" / f"{planted.kid}.key"
    os.chown(path, NOBODY, NOBODY)  # ...and handed over, as a planted file would be
    listed = sbx(sbx_home, "keys", "list", "--json")
    assert listed.returncode != 0, listed.stdout
    assert f"key file {path} belongs to user id {NOBODY}" in listed.stderr
    token = sbx(sbx_home, "session", "token", "s1")
    assert token.returncode != 0 and not token.stdout, token
    os.unlink(path)
    kept = sbx(sbx_home, "keys", "list", "--json")
    assert kept.returncode == 0, kept.stderr
    assert planted.kid not in {row["kid"] for row in json.loads(kept.stdout)}
