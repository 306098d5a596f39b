"""The deployment's signing keys, by key id, so that keys can rotate.

Where keys come from (docs/configuration.md, "Keys and tokens"):

* ``SBX_SECRET_KEY``, when set, is one key, and the one that signs;
* ``$SBX_HOME/secret.key``, generated (0600, exclusively) on first use when
  no key exists at all;
* ``$SBX_HOME/keys/<kid>.key``, one file per key added by ``sbx keys rotate``
  or ``sbx keys import`` (0600 in a 0700 directory).

The newest key signs (``SBX_SECRET_KEY`` first when set); every key verifies
until it is removed (``sbx keys remove KID``). A key id is derived from the
key itself (:func:`key_id`), so every machine holding the same key names it
the same way without coordination. :meth:`KeyringStore.current` notices keys
added or removed by another process within :data:`RECHECK_S` (it looks at the
files' stamps at most that often) and reloads.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..private_dirs import make_private_dirs
from .primitives import b64, derive

KEY_ID_RE = re.compile(r"[A-Za-z0-9_-]{8}\Z")
MIN_SECRET_BYTES = 16
RECHECK_S = 1.0
"""How often the key files are looked at for keys added or removed meanwhile."""


class KeyringError(ValueError):
    """A key that cannot be used, added or removed (the message says why)."""


class KeyFileExposed(KeyringError):
    """A key file that another user owns, or that group or others may read or write:
    its key may be known or chosen by someone else, so no token is signed or checked
    with it (what is stored under the keyring is refused whole, not skipped)."""


def key_id(secret: bytes) -> str:
    """The 8-character id of ``secret`` (a hash of it: names the key, reveals nothing)."""
    return b64(hashlib.sha256(b"sbx-key-id:" + secret).digest())[:8]


@dataclass(frozen=True)
class Key:
    """One signing key. ``source`` is ``env``, ``secret.key`` or ``keys/``."""

    kid: str
    secret: bytes = field(repr=False)
    created: float
    source: str

    def derived(self, purpose: str) -> bytes:
        """This key's sub-key for ``purpose`` (see :func:`~.primitives.derive`)."""
        return derive(self.secret, purpose)


class Keyring:
    """An immutable set of keys; the first (newest) signs."""

    def __init__(self, keys: Iterable[Key]) -> None:
        ordered = sorted(keys, key=lambda k: -k.created)
        if not ordered:
            raise KeyringError("the keyring is empty")
        self.keys: tuple[Key, ...] = tuple(ordered)
        self._by_id = {k.kid: k for k in reversed(ordered)}

    @classmethod
    def of(cls, *secrets_: bytes) -> Keyring:
        """A keyring of ``secrets_``, the first signing (for tests and embedders)."""
        now = time.time()
        return cls(Key(key_id(_checked(s)), s, now - i, "code") for i, s in enumerate(secrets_))

    @property
    def signing(self) -> Key:
        """The key that signs new tokens and MACs."""
        return self.keys[0]

    def get(self, kid: str) -> Key | None:
        """The key named ``kid`` (None: unknown or removed)."""
        return self._by_id.get(kid)


def _checked(secret: bytes) -> bytes:
    if len(secret) < MIN_SECRET_BYTES:
        raise KeyringError(f"a secret key must be at least {MIN_SECRET_BYTES} bytes")
    return secret


def _read_private(path: Path) -> bytes | None:
    """The bytes of the regular file ``path`` (never through a symlink); None when absent."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise KeyringError(f"cannot read key file {path.name}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KeyringError(f"key file {path.name} is not a regular file")
        _check_private(path, st)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _check_private(path: Path, st: os.stat_result) -> None:
    if st.st_uid != os.geteuid():
        raise KeyFileExposed(
            f"key file {path} belongs to user id {st.st_uid}, not to this user "
            f"({os.geteuid()}): it is not used; replace it with a key of this user's own"
        )
    if (mode := stat.S_IMODE(st.st_mode)) & 0o077:
        raise KeyFileExposed(
            f"key file {path} is open to other users (mode {mode:04o}): it is not used; "
            "chmod 600 it, and if anyone else could have read or replaced it, rotate "
            "the key (sbx keys rotate)"
        )


def _write_exclusive(path: Path, data: bytes) -> None:
    """Create ``path`` (0600) holding ``data``, complete or not at all; FileExistsError if taken."""
    tmp = path.with_name(f".tmp-{os.getpid()}-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # never replaces: the first complete file wins
    finally:
        os.unlink(tmp)


def load_or_create_secret(path: Path) -> bytes:
    """The secret stored at ``path``, created (mode 0600, exclusively) on first use."""
    data = _read_private(path)
    if data is not None and data.strip():
        return data.strip()
    make_private_dirs(path.parent)
    secret = secrets.token_hex(32).encode()
    try:
        _write_exclusive(path, secret)
    except FileExistsError:
        # Another process created it first; use theirs.
        return (_read_private(path) or b"").strip()
    return secret


class KeyringStore:
    """The keys of one ``SBX_HOME`` (plus ``SBX_SECRET_KEY``); see the module docstring."""

    def __init__(self, home: Path, env_secret: bytes | None = None) -> None:
        self.home = Path(home)
        self.legacy = self.home / "secret.key"
        self.dir = self.home / "keys"
        self.env_secret = _checked(env_secret) if env_secret else None
        self._lock = threading.Lock()
        self._stamp: tuple[object, ...] | None = None
        self._ring: Keyring | None = None
        self._checked = 0.0

    # -- reading ---------------------------------------------------------------------------

    def exists(self) -> bool:
        """True when a key is configured or stored here (this machine can mint tokens)."""
        return self.env_secret is not None or self.legacy.exists() or any(self._files())

    def _files(self) -> list[Path]:
        try:
            return sorted(p for p in self.dir.iterdir() if p.name.endswith(".key"))
        except FileNotFoundError:
            return []

    def _state(self) -> tuple[object, ...]:
        stamps: list[object] = []
        for path in (self.legacy, self.dir):
            try:
                st = os.stat(path)
                stamps.append((st.st_ino, st.st_mtime_ns, st.st_size))
            except FileNotFoundError:
                stamps.append(None)
        return tuple(stamps)

    def current(self, *, create: bool = False) -> Keyring:
        """The keyring as stored now (reloaded when a key file changed since the last call).

        ``create`` generates ``secret.key`` when there is no key at all.
        Raises :class:`KeyringError` when there is none and ``create`` is False.
        """
        ring, now = self._ring, time.monotonic()
        if ring is not None and now - self._checked < RECHECK_S:
            return ring  # a verification per call must not cost two stats
        with self._lock:
            state = self._state()
            self._checked = now
            if self._ring is not None and state == self._stamp:
                return self._ring
            keys = self._load()
            if not keys and create:
                load_or_create_secret(self.legacy)
                state, keys = self._state(), self._load()
            if not keys:
                raise KeyringError(
                    f"no secret key: set SBX_SECRET_KEY or run where {self.legacy} exists"
                )
            self._ring, self._stamp = Keyring(keys), state
            return self._ring

    def _load(self) -> list[Key]:
        keys: list[Key] = []
        if self.env_secret is not None:
            keys.append(Key(key_id(self.env_secret), self.env_secret, math.inf, "env"))
        legacy = _read_private(self.legacy)
        if legacy is not None and legacy.strip():
            created = os.stat(self.legacy).st_mtime
            keys.append(Key(key_id(legacy.strip()), legacy.strip(), created, "secret.key"))
        for path in self._files():
            try:
                keys.append(self._parse(path))
            except KeyFileExposed:
                raise
            except (ValueError, TypeError, KeyError):
                continue  # not a key file of the keyring's own making
        seen: set[str] = set()
        unique = []
        for k in keys:
            if k.kid not in seen:
                seen.add(k.kid)
                unique.append(k)
        return unique

    def _parse(self, path: Path) -> Key:
        data = json.loads(_read_private(path) or b"")
        secret = bytes.fromhex(data["secret"])
        kid = key_id(_checked(secret))
        if path.name != f"{kid}.key":
            raise KeyringError(f"{path.name} does not hold the key its name says")
        return Key(kid, secret, float(data["created"]), "keys/")

    # -- changing --------------------------------------------------------------------------

    def _private_dir(self) -> None:
        make_private_dirs(self.dir)
        st = os.lstat(self.dir)
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            raise KeyringError(f"{self.dir} is not a private directory of this user")
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(self.dir, 0o700)

    def add(self, secret: bytes | None = None) -> Key:
        """Store a new key (random unless given); being the newest, it signs from now on."""
        secret = _checked(secret) if secret is not None else secrets.token_hex(32).encode()
        self._private_dir()
        kid = key_id(secret)
        # Strictly newer than any key here, even on a coarse clock.
        newest = max((k.created for k in self._load() if k.source != "env"), default=0.0)
        created = max(time.time(), newest + 0.001)
        body = json.dumps({"created": created, "secret": secret.hex()}).encode()
        try:
            _write_exclusive(self.dir / f"{kid}.key", body)
        except FileExistsError:
            raise KeyringError(f"key {kid} is in the keyring already") from None
        self._checked = 0.0  # this process sees its own change at once
        return Key(kid, secret, created, "keys/")

    def remove(self, kid: str) -> Key:
        """Remove key ``kid``: tokens and MACs made with it stop verifying.

        Raises :class:`KeyringError` for an unknown key, the ``SBX_SECRET_KEY``
        key (unset the variable instead) and the last stored key.
        """
        keys = {k.kid: k for k in self._load()}
        key = keys.get(kid)
        if key is None:
            raise KeyringError(f"no key {kid} in the keyring")
        if key.source == "env":
            raise KeyringError(f"key {kid} is SBX_SECRET_KEY: unset the variable to drop it")
        if len(keys) == 1:
            raise KeyringError(f"key {kid} is the only key: rotate first")
        path = self.legacy if key.source == "secret.key" else self.dir / f"{kid}.key"
        os.unlink(path)
        self._checked = 0.0
        return key
