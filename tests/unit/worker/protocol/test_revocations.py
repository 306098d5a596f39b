"""Revocation epochs in a real Redis: they only move forward, and survive the ledger
losing everything (the embedded one keeps nothing on disk) through the home's mirror."""

from __future__ import annotations

import stat
from pathlib import Path

import redis

from process_registry.sessions import SessionSigner
from worker.protocol.revocations import read_epoch, revoke


def test_revocation_moves_the_epoch_and_survives_a_ledger_reset(
    external_redis_url: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(external_redis_url)
    client.flushdb()
    signer = SessionSigner(b"k" * 32)
    assert read_epoch(client, "alice", tmp_path) == 0
    before = signer.token("alice", epoch=0)
    first = revoke(client, "alice", tmp_path)
    second = revoke(client, "alice", tmp_path)
    assert 0 < first < second == read_epoch(client, "alice", tmp_path)
    assert read_epoch(client, "bob", tmp_path) == 0
    assert not signer.verify("alice", before, epoch=read_epoch(client, "alice", tmp_path))
    mirror = tmp_path / "sessions" / "revoked" / "alice"
    assert stat.S_IMODE(mirror.stat().st_mode) == 0o600
    client.flushdb()  # a restarted embedded ledger remembers nothing
    assert read_epoch(client, "alice", tmp_path) == second
    assert not signer.verify("alice", before, epoch=read_epoch(client, "alice", tmp_path))
    # A revocation after the reset still moves past the mirrored epoch.
    client.flushdb()
    assert revoke(client, "alice", tmp_path) > second
