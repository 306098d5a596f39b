"""The head of each session's receipt chain, sealed with a worker-only key.

One file per owner session under ``$SBX_HOME/logs/process-chains/`` (named by
a hash of the session id): the sequence number and sha256 of the session's
latest receipt, the receipt being written (``pending``: a crash between the
receipt and its head is rolled forward), the hashes of receipts pruned by
retention (so a gap they leave is not mistaken for a deletion) and a
``tampered`` note. With a :class:`~process_registry.tokens.sealer.Sealer`
every head carries a seal over all of that, and every write fsyncs it.

A head whose seal does not match when a writer loads it was changed outside
sbx: the writer records that in ``tampered`` (sealed from then on, so the
evidence survives the writes that follow) and carries on from it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .atomic import atomic_write, read_nofollow
from .models import IntegrityError, NotFound, Receipt, UnsafePath
from .tokens.primitives import canonical
from .tokens.sealer import SealCheck, Sealer

log = logging.getLogger(__name__)

CHAIN_PURPOSE = "receipt-chain:v1"
RECEIPT_PURPOSE = "receipt:v1"


def chain_file(session_id: str) -> str:
    """The chain head's file name for ``session_id`` (a hash: ids may hold any of ``.:@``)."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:40] + ".json"


def _body(chain: dict[str, Any]) -> bytes:
    return canonical({k: v for k, v in chain.items() if k not in ("mac", "exists")})


class ChainHeads:
    """Load and save chain heads in ``directory``; ``sealer`` None: unsealed (tests, tools)."""

    def __init__(self, directory: Path, sealer: Sealer | None, keep_pruned: int) -> None:
        self.dir = directory
        self.sealer = sealer
        self.keep_pruned = keep_pruned
        # A head holds at most keep_pruned pruned hashes (~80 bytes each): a larger file
        # was planted, and is not read into memory.
        self.max_bytes = 128 * keep_pruned + (1 << 20)

    def seal_check(self, chain: dict[str, Any]) -> SealCheck | None:
        """How the stored head's seal checks (None: no sealer, or no stored head)."""
        if self.sealer is None or not chain.get("exists"):
            return None
        return self.sealer.check(chain.get("mac"), CHAIN_PURPOSE, _body(chain))

    def load(
        self, session_id: str, load_receipt: Callable[[str], Receipt], *, for_write: bool = False
    ) -> dict[str, Any]:
        """The head of ``session_id``'s chain (``exists`` False when there is no file).

        A ``pending`` receipt that made it to disk becomes the head. With
        ``for_write``, a head whose seal fails is noted as ``tampered``.
        """
        chain: dict[str, Any] = {
            "session": session_id,
            "head_seq": 0,
            "head_sha": None,
            "pending": None,
            "pruned": {},
            "tampered": None,
            "exists": False,
        }
        try:
            stored = json.loads(read_nofollow(self.dir / chain_file(session_id), self.max_bytes))
        except (FileNotFoundError, UnsafePath, ValueError):
            stored = None
        if isinstance(stored, dict) and stored.get("session") == session_id:
            chain.update(stored)
            chain["exists"] = True
        check = self.seal_check(chain)
        if for_write and check not in (None, "ok") and not chain.get("tampered"):
            log.warning("receipt chain head of a session was changed outside sbx (seal %s)", check)
            at = chain["head_seq"] + 1
            chain["tampered"] = f"its seal did not match ({check}) before receipt #{at}"
        pending = chain.get("pending")
        if isinstance(pending, dict):
            # The receipt named as pending made it to disk: it is the real head.
            with contextlib.suppress(NotFound, IntegrityError, UnsafePath, ValidationError):
                r = load_receipt(str(pending.get("process_id")))
                if r.sha256 == pending.get("sha256") and r.seq == chain["head_seq"] + 1:
                    chain["head_seq"], chain["head_sha"] = r.seq, r.sha256
            chain["pending"] = None
        return chain

    def sessions(self) -> list[str]:
        """The sessions with a chain head here (whose receipts this home keeps or kept)."""
        found: list[str] = []
        for name in sorted(os.listdir(self.dir)):
            if name.startswith(".") or not name.endswith(".json"):
                continue
            with contextlib.suppress(OSError, UnsafePath, ValueError):
                stored = json.loads(read_nofollow(self.dir / name, self.max_bytes))
                session = stored.get("session") if isinstance(stored, dict) else None
                if isinstance(session, str) and chain_file(session) == name:
                    found.append(session)
        return found

    def save(self, chain: dict[str, Any], *, durable: bool = True) -> None:
        """Persist ``chain`` atomically and sealed; ``durable``: fsynced (file and directory).

        The ``pending`` note before a receipt need not be durable: a power cut that
        loses it loses the unsynced receipt too, or leaves a head one step behind a
        synced receipt, which verify reports rather than hides.
        """
        pruned = chain["pruned"]
        # Bounded: only the newest pruned hashes can still be someone's predecessor.
        keep = sorted(pruned, key=int)[-self.keep_pruned :]
        chain["pruned"] = {k: pruned[k] for k in keep}
        chain.pop("mac", None)
        if self.sealer is not None:
            chain["mac"] = self.sealer.seal(CHAIN_PURPOSE, _body(chain))
        data = json.dumps({k: v for k, v in chain.items() if k != "exists"}, sort_keys=True)
        atomic_write(self.dir, chain_file(chain["session"]), data.encode(),
                     fsync_file=durable, fsync_dir=durable)  # fmt: skip
        chain["exists"] = True
