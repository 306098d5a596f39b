"""Compression continuations: which session continues which, for receipt reads.

When an agent's context is compressed, the new (child) session carries on
the old (parent) session's work and may read its receipts. Delegated or
unrelated sessions may not. One small JSON file per child under
``$SBX_HOME/sessions/``, written atomically and exclusively: a child has one
parent for good, and no chain may loop.

Authorization of :meth:`ContinuationStore.record` (the caller must hold the
PARENT's verified token) is the caller's job; this store only keeps facts.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from .atomic import atomic_write, ensure_private_dir, read_nofollow
from .models import AlreadyExists, InvalidId, UnsafePath
from .tokens.formats import validate_session_id

MAX_CHAIN = 256
"""Longest continuation chain followed; deeper chains are treated as unrelated."""


def _file_name(session_id: str) -> str:
    # Session ids may contain '.', ':' and '@': hash them into a safe, fixed-size name.
    return hashlib.sha256(session_id.encode()).hexdigest()[:40] + ".json"


class ContinuationStore:
    """``child -> parent`` facts under ``home/sessions``."""

    def __init__(self, home: Path) -> None:
        self.dir = ensure_private_dir(Path(home) / "sessions")

    def record(self, parent: str, child: str) -> None:
        """Record that ``child`` continues ``parent``.

        Idempotent for the same pair; raises :class:`AlreadyExists` when
        ``child`` already continues another session and :class:`InvalidId`
        for a self-continuation or a loop.
        """
        validate_session_id(parent)
        validate_session_id(child)
        if parent == child or child in self.ancestors(parent):
            raise InvalidId("a session cannot continue itself (continuation loop)")
        data = json.dumps({"child": child, "parent": parent, "recorded_at": time.time()})
        try:
            atomic_write(self.dir, _file_name(child), data.encode(), exclusive=True)
        except AlreadyExists:
            if self.parent_of(child) != parent:
                raise AlreadyExists(f"session {child} already continues another session") from None

    def parent_of(self, child: str) -> str | None:
        """The session ``child`` continues, or None."""
        try:
            data = json.loads(read_nofollow(self.dir / _file_name(child)))
        except (FileNotFoundError, UnsafePath, ValueError):
            return None
        if not isinstance(data, dict) or data.get("child") != child:
            return None  # a hash collision or a tampered file proves nothing
        parent = data.get("parent")
        return parent if isinstance(parent, str) else None

    def ancestors(self, session: str) -> list[str]:
        """Sessions ``session`` continues, nearest first (bounded by :data:`MAX_CHAIN`)."""
        chain: list[str] = []
        current = session
        for _ in range(MAX_CHAIN):
            parent = self.parent_of(current)
            if parent is None or parent in chain or parent == session:
                break
            chain.append(parent)
            current = parent
        return chain

    def may_read(self, reader: str, owner: str) -> bool:
        """True when ``reader`` is ``owner`` or continues it through a chain of continuations."""
        return reader == owner or owner in self.ancestors(reader)
