"""Session tokens and the secret file."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from process_registry.sessions import SessionSigner, load_or_create_secret
from process_registry.tokens.formats import InvalidSessionId, validate_session_id


def test_token_verifies_only_its_session() -> None:
    signer = SessionSigner(b"k" * 32)
    token = signer.token("alice")
    assert signer.verify("alice", token)
    assert not signer.verify("bob", token)
    assert not signer.verify("alice", token[:-1] + ("A" if token[-1] != "A" else "B"))
    assert not signer.verify("alice", None)
    assert not SessionSigner(b"x" * 32).verify("alice", token)


@pytest.mark.parametrize("bad", ["", "../etc", "a/b", "a b", "x" * 129, "-lead", "é"])
def test_invalid_session_ids(bad: str) -> None:
    with pytest.raises(InvalidSessionId):
        validate_session_id(bad)


def test_secret_created_once_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "home" / "secret.key"
    first = load_or_create_secret(path)
    assert load_or_create_secret(path) == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(first) >= 32
