"""Revocation epochs in a real Redis: they only move forward, and survive the ledger
losing everything (the embedded one keeps nothing on disk) through the home's mirror."""

from __future__ import annotations

import stat
from pathlib import Path

import redis

from process_registry.sessions import SessionSigner
from worker.protocol.revocations import REVOKED_KEY, MirrorFollower, read_epoch, revoke


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


def test_every_worker_home_brings_back_revocations_made_from_another(
    external_redis_url: str, tmp_path: Path
) -> None:
    """A fleet: the operator revokes from a home of its own; a worker's follower copies
    the revocation into the worker's home, whose mirror then seeds an emptied ledger."""
    client = redis.Redis.from_url(external_redis_url)
    client.flushdb()
    operator, worker, joiner = tmp_path / "operator", tmp_path / "worker", tmp_path / "joiner"
    follower = MirrorFollower(worker)
    assert follower.follow(client) == []
    epoch = revoke(client, "alice", operator)
    client.sadd(REVOKED_KEY, "../escape", "")  # not session ids: never file names
    assert follower.follow(client) == ["alice"]
    assert follower.follow(client) == []  # nothing moved since
    assert not (worker / "sessions" / "escape").exists()
    assert sorted(p.name for p in (worker / "sessions" / "revoked").iterdir()) == ["alice"]
    client.flushdb()  # the ledger restarts empty
    assert read_epoch(client, "alice", worker) == epoch  # seeded from the worker's home
    # Seeding lists the revocation again: a worker joining later copies it too.
    assert MirrorFollower(joiner).follow(client) == ["alice"]
    assert revoke(client, "alice", operator) > epoch
    assert follower.follow(client) == ["alice"]


def test_a_follower_notices_the_first_revocation_of_an_emptied_ledger(
    external_redis_url: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(external_redis_url)
    client.flushdb()
    operator, worker = tmp_path / "operator", tmp_path / "worker"
    follower = MirrorFollower(worker)
    revoke(client, "alice", operator)
    assert follower.follow(client) == ["alice"]
    client.flushdb()
    revoke(client, "bob", operator)  # the ledger's first revocation, as "alice" was
    assert follower.follow(client) == ["bob"]
