"""Session revocation: each session's *epoch*, in the ledger (and mirrored under SBX_HOME).

A v2 token's MAC covers its session's epoch (``process_registry.sessions``):
``sbx session revoke SID`` moves the epoch, so every token of that session
minted before stops verifying on every worker at its next call, and tokens
minted after carry the new epoch. The epoch is kept in the ledger
(``sbx:session:<id>:epoch``, no expiry) and mirrored to
``$SBX_HOME/sessions/revoked/<id>`` so that a restart of the embedded ledger,
which keeps nothing on disk, does not bring revoked tokens back: a ledger
without the ``sbx:sessions:seeded`` mark (new, or emptied by a restart) is
seeded from the mirror before its answer counts. A check is one round trip (for a tool
call, the round trip that claims it: ``CallLedger.claim_reading_epoch``).

Workers of a fleet each have a home of their own, so every worker also copies every
revocation the ledger knows into its own mirror (:class:`MirrorFollower`, on its
heartbeat): whichever worker seeds an emptied ledger brings all of them back, not only
those revoked from its own home. The ledger lists revoked sessions
(``sbx:sessions:revoked``) with a version that changes on each revocation, so that a
follower reads the list only when it changed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from pathlib import Path
from typing import Any

import redis

from worker.protocol.credentials import InvalidSessionId, validate_session_id

SEEDED_KEY = "sbx:sessions:seeded"
REVOKED_KEY = "sbx:sessions:revoked"
"""The set of sessions ever revoked (while the ledger lasts; seeding restores it)."""
REVOKED_VERSION_KEY = "sbx:sessions:revoked:version"
"""A fresh random value at every revocation (and seeding), never one seen before (a count
would start again after a restart and could come back to a value a follower saw):
followers compare it before reading the set."""


def epoch_key(session_id: str) -> str:
    """The ledger key holding ``session_id``'s revocation epoch."""
    return f"sbx:session:{session_id}:epoch"


def _mirror_dir(home: Path) -> Path:
    return home / "sessions" / "revoked"


def _read_mirror(home: Path | None, session_id: str) -> int:
    if home is None:
        return 0
    with contextlib.suppress(OSError, ValueError):
        fd = os.open(_mirror_dir(home) / session_id, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            return int(os.read(fd, 64).strip() or 0)
        finally:
            os.close(fd)
    return 0


def _write_mirror(home: Path, session_id: str, epoch: int) -> None:
    # Only a worker or an operator's ``sbx session revoke`` writes the mirror: a client that
    # reads epochs never loads this.
    from process_registry.private_dirs import make_private_dirs

    directory = _mirror_dir(home)
    make_private_dirs(directory)
    tmp = directory / f".tmp-{secrets.token_hex(6)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, str(epoch).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, directory / session_id)


def _seed(client: redis.Redis, home: Path | None) -> None:
    """Copy the mirror's epochs into a ledger that lost them (or never had them)."""
    pipe = client.pipeline(transaction=False)
    with contextlib.suppress(OSError):
        for entry in os.scandir(_mirror_dir(home)) if home is not None else ():
            with contextlib.suppress(InvalidSessionId, ValueError):
                session_id = validate_session_id(entry.name)
                pipe.set(epoch_key(session_id), _read_mirror(home, session_id), nx=True)
                pipe.sadd(REVOKED_KEY, session_id)
    pipe.set(REVOKED_VERSION_KEY, secrets.token_hex(12))
    pipe.set(SEEDED_KEY, "1")
    pipe.execute()


def read_epoch(client: redis.Redis, session_id: str, home: Path | None = None) -> int:
    """``session_id``'s revocation epoch (0: never revoked). Raises ``redis.RedisError``."""
    raw: Any = client.mget([epoch_key(session_id), SEEDED_KEY])
    if raw[1] is None:
        _seed(client, home)
        raw = client.mget([epoch_key(session_id), SEEDED_KEY])
    return parse_epoch(raw[0])


def parse_epoch(raw: Any) -> int:
    """The epoch a ledger value of :func:`epoch_key` holds (0: none, or not a number)."""
    try:
        return int(raw or 0)
    except ValueError:
        return 0


_REVOKE = """
local now = tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local floor = tonumber(ARGV[2])
local epoch = math.max(now, cur + 1, floor + 1)
redis.call('SET', KEYS[1], epoch)
redis.call('SADD', KEYS[2], ARGV[3])
redis.call('SET', KEYS[3], ARGV[4])
return epoch
"""


def revoke(client: redis.Redis, session_id: str, home: Path | None = None) -> int:
    """Move ``session_id``'s epoch past every earlier one; the new epoch.

    Tokens of the session minted before stop verifying. Raises ``redis.RedisError``
    and :class:`~process_registry.sessions.InvalidSessionId`.
    """
    validate_session_id(session_id)
    floor = _read_mirror(home, session_id)
    keys = (epoch_key(session_id), REVOKED_KEY, REVOKED_VERSION_KEY)
    args = (int(time.time() * 1000), floor, session_id, secrets.token_hex(12))
    epoch = int(client.eval(_REVOKE, len(keys), *keys, *args))
    if home is not None:
        _write_mirror(home, session_id, epoch)
    return epoch


class MirrorFollower:
    """Keeps ``home``'s mirror holding every revocation the ledger knows (a worker's)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._version: Any = object()  # none read yet: the first :meth:`follow` reads all

    def follow(self, client: redis.Redis) -> list[str]:
        """Copy into the mirror each revocation newer than the mirror's; the sessions
        written (none when the ledger's version did not change since the last call).
        Raises ``redis.RedisError`` and ``OSError``."""
        version: Any = client.get(REVOKED_VERSION_KEY)
        if version == self._version:
            return []
        members: Any = client.smembers(REVOKED_KEY)
        sessions = sorted(_valid(members))
        epochs: Any = client.mget([epoch_key(s) for s in sessions]) if sessions else []
        written = []
        for session_id, raw in zip(sessions, epochs, strict=True):
            epoch = parse_epoch(raw)
            if epoch > _read_mirror(self.home, session_id):
                _write_mirror(self.home, session_id, epoch)
                written.append(session_id)
        self._version = version
        return written


def _valid(members: Any) -> list[str]:
    """The members that are session ids (each becomes a file name of the mirror)."""
    valid = []
    for member in members:
        name = member.decode() if isinstance(member, bytes) else str(member)
        with contextlib.suppress(InvalidSessionId, ValueError):
            valid.append(validate_session_id(name))
    return valid
