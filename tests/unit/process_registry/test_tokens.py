"""Session tokens v2 (key id, expiry, revocation epoch), v1 compatibility, keyring
rotation, approver credentials and seals."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from process_registry.sessions import SessionSigner
from process_registry.tokens.approver import approver_token, verify_approver
from process_registry.tokens.formats import TokenInfo, token_info
from process_registry.tokens.keyring import Keyring, KeyringError, KeyringStore, key_id
from process_registry.tokens.primitives import mac
from process_registry.tokens.sealer import Sealer


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_v2_token_format_and_claims() -> None:
    clock = Clock()
    signer = SessionSigner(b"k" * 32, clock=clock)
    token = signer.token("alice", ttl=3600)
    prefix, kid, expires, tag = token.split(".")
    assert (prefix, kid, int(expires), len(tag)) == ("sbx2", key_id(b"k" * 32), 1_700_003_600, 43)
    assert token_info(token) == TokenInfo(kid, 1_700_003_600)
    assert signer.verify("alice", token)
    assert not signer.verify("bob", token)


def test_v2_token_expires() -> None:
    clock = Clock()
    signer = SessionSigner(b"k" * 32, clock=clock)
    token = signer.token("alice", ttl=60)
    clock.now += 59
    assert signer.verify("alice", token)
    clock.now += 2
    assert not signer.verify("alice", token)


def test_revocation_epoch_invalidates_earlier_tokens_only() -> None:
    signer = SessionSigner(b"k" * 32)
    before = signer.token("alice")
    assert signer.verify("alice", before, epoch=0)
    assert not signer.verify("alice", before, epoch=7)
    after = signer.token("alice", epoch=7)
    assert signer.verify("alice", after, epoch=7)


def test_a_changed_expiry_or_key_id_does_not_verify() -> None:
    signer = SessionSigner(b"k" * 32)
    token = signer.token("alice", ttl=60)
    prefix, kid, expires, tag = token.split(".")
    assert not signer.verify("alice", f"{prefix}.{kid}.{int(expires) + 10**6}.{tag}")
    assert not signer.verify("alice", f"{prefix}.AAAAAAAA.{expires}.{tag}")


def test_v1_tokens_verify_until_turned_off_or_revoked() -> None:
    on = SessionSigner(b"k" * 32)
    v1 = on.token_v1("alice")
    assert v1.startswith("sbx1.") and on.verify("alice", v1)
    assert not on.verify("alice", v1, epoch=1)  # a revoked session's v1 tokens are dead
    off = SessionSigner(b"k" * 32, accept_v1=False)
    assert not off.verify("alice", v1)


def test_rotation_newest_signs_older_verify_until_removed(tmp_path: Path) -> None:
    store = KeyringStore(tmp_path)
    first = store.current(create=True)
    old_signer = SessionSigner(store.current)
    old_token = old_signer.token("alice")
    added = store.add()
    assert store.current().signing.kid == added.kid != first.signing.kid
    new_token = old_signer.token("alice")
    assert token_info(new_token).kid == added.kid  # type: ignore[union-attr]
    assert old_signer.verify("alice", old_token) and old_signer.verify("alice", new_token)
    store.remove(first.signing.kid)
    assert not old_signer.verify("alice", old_token)
    assert old_signer.verify("alice", new_token)
    with pytest.raises(KeyringError, match="only key"):
        store.remove(added.kid)


def test_keyring_files_are_private(tmp_path: Path) -> None:
    store = KeyringStore(tmp_path)
    store.current(create=True)
    key = store.add()
    path = tmp_path / "keys" / f"{key.kid}.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "keys").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "secret.key").stat().st_mode) == 0o600


def test_env_key_signs_and_cannot_be_removed(tmp_path: Path) -> None:
    store = KeyringStore(tmp_path, env_secret=b"e" * 32)
    store.add()
    assert store.current().signing.kid == key_id(b"e" * 32)
    with pytest.raises(KeyringError, match="SBX_SECRET_KEY"):
        store.remove(key_id(b"e" * 32))


def test_a_key_file_under_another_name_is_ignored(tmp_path: Path) -> None:
    store = KeyringStore(tmp_path)
    store.current(create=True)
    key = store.add()
    os.rename(tmp_path / "keys" / f"{key.kid}.key", tmp_path / "keys" / "AAAAAAAA.key")
    assert store.current().get(key.kid) is None


def test_approver_credential_is_not_a_session_token() -> None:
    ring = Keyring.of(b"k" * 32)
    approver = approver_token(ring)
    assert approver is not None and approver.startswith("sbxa1.")
    assert verify_approver(ring, approver)
    assert not verify_approver(Keyring.of(b"x" * 32), approver)
    session = SessionSigner(ring).token("alice")
    assert not verify_approver(ring, session)
    assert not verify_approver(ring, approver[:-1] + ("A" if approver[-1] != "A" else "B"))


def test_seals_are_per_purpose_and_per_key() -> None:
    ring = Keyring.of(b"k" * 32)
    receipts, grants = Sealer(ring, "receipt"), Sealer(ring, "grant")
    seal = receipts.seal("abc")
    assert receipts.check(seal, "abc") == "ok"
    assert receipts.check(seal, "abd") == "bad"
    assert grants.check(seal, "abc") == "bad"
    assert receipts.check("", "abc") == "missing"
    assert Sealer(Keyring.of(b"x" * 32), "receipt").check(seal, "abc") == "unknown_key"


def test_mac_parts_are_unambiguous() -> None:
    assert mac(b"k", "ab", "c") != mac(b"k", "a", "bc")
