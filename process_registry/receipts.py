"""Receipts: the durable, redacted, bounded, owner-only record of each finished process.

Layout under ``$SBX_HOME/logs``:

* ``process-results/<process_id>.json``: one receipt per process (0600 in a
  0700 directory), written once (``os.link`` of a complete temp file: a second
  writer gets :class:`AlreadyExists`). Retention ages it by its sealed
  ``ended_at`` (its mtime is kept equal to that).
* ``process-chains/<hash of session>.json``: the head of each session's hash
  chain (:mod:`process_registry.receipt_chains`), fsynced with every receipt.

Contracts: ``command``, ``cwd`` and ``output`` are redacted here whatever the caller
did (forced); output is cut to ``output_cap`` bytes (head + tail + marker);
with a ``sealer`` (workers always pass one) each receipt and chain head is
sealed with a key only keyring holders have; :meth:`ReceiptStore.read` and
:meth:`ReceiptStore.list` return only receipts the reader session may read
(owner or compression continuation), and only intact, sealed ones;
:meth:`ReceiptStore.verify` reports edited, deleted and reordered receipts
and a deleted or changed chain head (:mod:`process_registry.receipt_verify`).
A symlink or special file where a receipt should be reads as no receipt.
"""

from __future__ import annotations

import bisect
import builtins
import contextlib
import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .atomic import (
    atomic_write,
    ensure_private_dir,
    read_nofollow,
    remove,
    sweep_temp_files,
    validate_id,
)
from .continuations import ContinuationStore
from .models import (
    AlreadyExists,
    IntegrityError,
    NotFound,
    PermissionDenied,
    ProcessTableError,
    Receipt,
    UnsafePath,
    redact,
)
from .receipt_chains import RECEIPT_PURPOSE, ChainHeads
from .receipt_excerpt import bound_text, excerpt
from .receipt_verify import verify_sessions
from .tokens.sealer import Sealer

log = logging.getLogger(__name__)

DEFAULT_MAX_AGE = 7 * 24 * 3600.0
DEFAULT_MAX_COUNT = 1000
DEFAULT_OUTPUT_CAP = 64 * 1024
# A receipt's mtime is its sealed ended_at; this much difference is file-system granularity.
_MTIME_SLACK = 2.0


class ReceiptStore:
    """Receipts of one ``SBX_HOME``; safe for threads and for several worker processes."""

    def __init__(
        self,
        home: Path,
        *,
        continuations: ContinuationStore | None = None,
        max_age: float = DEFAULT_MAX_AGE,
        max_count: int = DEFAULT_MAX_COUNT,
        output_cap: int = DEFAULT_OUTPUT_CAP,
        clock: Callable[[], float] = time.time,
        sealer: Sealer | None = None,
    ) -> None:
        """``sealer``: seals receipts and chain heads (None: hashes only, which anyone
        who can write the files can recompute)."""
        home = Path(home)
        ensure_private_dir(home / "logs")
        self.dir = ensure_private_dir(home / "logs" / "process-results")
        self.chains = ensure_private_dir(home / "logs" / "process-chains")
        self.continuations = continuations or ContinuationStore(home)
        self.max_age = max_age
        self.max_count = max_count
        self.output_cap = output_cap
        self.clock = clock
        self.sealer = sealer
        # Bigger than any receipt (output and command JSON-escaped, up to 6 bytes a byte):
        # a larger file was planted, and is not read into memory.
        self.max_file_bytes = 8 * output_cap + (16 << 20)
        self.heads = ChainHeads(self.chains, sealer, keep_pruned=max_count + 16)
        self._lock = threading.Lock()
        # Sorted (mtime, file name) of the receipts directory, trusted while the
        # directory's mtime is the one we left it with (i.e. no other writer touched it):
        # retention on write is then O(log n) instead of a stat of every receipt.
        self._index: list[tuple[float, str]] | None = None
        self._index_stamp = 0
        sweep_temp_files(self.dir)
        sweep_temp_files(self.chains)

    # -- writing ---------------------------------------------------------------------------

    def path(self, process_id: str) -> Path:
        return self.dir / f"{validate_id(process_id, 'process id')}.json"

    def exists(self, process_id: str) -> bool:
        return os.path.lexists(self.path(process_id))

    def write(self, draft: Receipt) -> Receipt:
        """Redact, bound, chain and persist ``draft``; return the stored receipt.

        Raises :class:`AlreadyExists` when ``draft.process_id`` has a receipt:
        exactly one receipt per process, whoever races to write it. A file at that
        path that is not its intact, sealed receipt is replaced (:meth:`_evict_squatter`).
        """
        validate_id(draft.process_id, "process id")
        output, cut = bound_text(redact(draft.output), self.output_cap)
        clean = draft.model_copy(
            update={
                "command": redact(draft.command),
                "cwd": None if draft.cwd is None else redact(draft.cwd),
                "output": output,
                "output_truncated": draft.output_truncated or cut,
            }
        )
        with self._locked():
            if self.exists(draft.process_id):
                self._evict_squatter(draft.process_id)
            chain = self.heads.load(draft.owner_session_id, self._load, for_write=True)
            receipt = clean.sealed(chain["head_seq"] + 1, chain["head_sha"])
            if self.sealer is not None:
                seal = self.sealer.seal(RECEIPT_PURPOSE, receipt.sha256)
                receipt = receipt.model_copy(update={"mac": seal})
            chain["pending"] = {"process_id": receipt.process_id, "sha256": receipt.sha256}
            self.heads.save(chain, durable=False)
            stamp = os.stat(self.dir).st_mtime_ns
            atomic_write(
                self.dir,
                f"{receipt.process_id}.json",
                receipt.model_dump_json(indent=1).encode(),
                exclusive=True,
                mtime=receipt.ended_at,
            )
            self._indexed_add(stamp, receipt.ended_at, f"{receipt.process_id}.json")
            # Commit the head now (not only on the next write), so a deleted latest receipt shows.
            chain.update(head_seq=receipt.seq, head_sha=receipt.sha256, pending=None)
            self.heads.save(chain)
            self._prune_locked()
        return receipt

    def _evict_squatter(self, process_id: str) -> None:
        """Raise :class:`AlreadyExists` if ``process_id`` has its genuine receipt; else remove
        what sits at its path (call locked).

        Whatever else is there (a symlink, FIFO, garbage, a forged or moved receipt) was
        planted, e.g. by the session's own sandbox, which knows its process ids: taking it
        for the receipt would leave the process with no record and its chain with no gap
        for :meth:`verify` to report.
        """
        genuine = False
        with contextlib.suppress(NotFound, ValidationError, ValueError, OSError):
            genuine = self.intact(self._load(process_id), process_id)
        if genuine:
            raise AlreadyExists(f"receipt of {process_id} exists already")
        log.warning("replacing a file planted where the receipt of %s goes", process_id)
        remove(self.path(process_id))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # The thread lock orders this process's writers; flock orders other workers'.
        with self._lock:
            fd = os.open(
                self.chains / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
            )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    # -- retention -------------------------------------------------------------------------

    def prune(self) -> int:
        """Delete receipts older than ``max_age`` and beyond the newest ``max_count``.

        Age is the sealed ``ended_at`` (the mtime stamped from it only orders the
        index): a receipt whose mtime was changed outside sbx is restamped and kept
        for now. Only an intact, sealed receipt under its own name is recorded as
        pruned in its chain head; anything else is deleted unrecorded, so the gap
        a deleted genuine receipt left stays reported by :meth:`verify`.
        """
        with self._locked():
            return self._prune_locked(rescan=True)

    def _scan_index(self) -> builtins.list[tuple[float, str]]:
        entries: builtins.list[tuple[float, str]] = []
        with os.scandir(self.dir) as it:
            for e in it:
                if e.name.endswith(".json") and not e.name.startswith("."):
                    with contextlib.suppress(OSError):
                        entries.append((e.stat(follow_symlinks=False).st_mtime, e.name))
        entries.sort()
        return entries

    def _indexed_add(self, stamp_before: int, mtime: float, name: str) -> None:
        if self._index is not None and stamp_before == self._index_stamp:
            bisect.insort(self._index, (mtime, name))
            self._index_stamp = os.stat(self.dir).st_mtime_ns
        else:
            self._index = None  # someone else changed the directory: rescan next time

    def _prune_locked(self, *, rescan: bool = False) -> int:
        stamp = os.stat(self.dir).st_mtime_ns
        if rescan or self._index is None or stamp != self._index_stamp:
            self._index, self._index_stamp = self._scan_index(), stamp
        entries = self._index
        cutoff = self.clock() - self.max_age
        excess = len(entries) - self.max_count
        victims = [e for i, e in enumerate(entries) if e[0] < cutoff or i < excess]
        if not victims:
            return 0
        chains: dict[str, dict[str, Any]] = {}
        doomed: list[Path] = []
        kept: set[str] = set()
        for mtime, name in victims:
            path = self.dir / name
            try:
                r = Receipt.model_validate_json(read_nofollow(path, self.max_file_bytes))
            except (OSError, ValidationError, ValueError):
                doomed.append(path)  # unreadable: nothing to record, still bounded
                continue
            if not self.intact(r, name[: -len(".json")]):
                # Edited, unsealed or moved (a forged stand-in): deleted to stay bounded, but
                # its hash is no evidence, so the gap a deleted genuine receipt left stays visible.
                doomed.append(path)
                continue
            if abs(mtime - r.ended_at) > _MTIME_SLACK:
                # The mtime is not the sealed completion time we stamped (back-dated from
                # outside): restore it and rescan, rather than retire a receipt early.
                with contextlib.suppress(OSError):
                    os.utime(path, (r.ended_at, r.ended_at), follow_symlinks=False)
                kept.add(name)
                continue
            chain = chains.get(r.owner_session_id) or self.heads.load(
                r.owner_session_id, self._load, for_write=True
            )
            chains[r.owner_session_id] = chain
            chain["pruned"][str(r.seq)] = r.sha256
            doomed.append(path)
        gone = {name for _, name in victims} - kept
        self._index = None if kept else [e for e in entries if e[1] not in gone]
        # Record what is pruned before deleting it: a crash in between is harmless.
        for chain in chains.values():
            self.heads.save(chain)
        for path in doomed:
            remove(path)
        self._index_stamp = os.stat(self.dir).st_mtime_ns
        return len(doomed)

    # -- reading ---------------------------------------------------------------------------

    def _load(self, process_id: str) -> Receipt:
        try:
            data = read_nofollow(self.path(process_id), self.max_file_bytes)
        except (FileNotFoundError, UnsafePath):
            # A planted symlink or special file is no receipt (and its path is not news).
            raise NotFound(f"no receipt for process {process_id}") from None
        return Receipt.model_validate_json(data)

    def load(self, process_id: str) -> Receipt:
        """The stored receipt of ``process_id``, unchecked; :class:`NotFound` if none."""
        return self._load(process_id)

    def read(self, process_id: str, session_id: str, *, verified: bool = True) -> Receipt:
        """The receipt of ``process_id`` if ``session_id`` may read it.

        Raises :class:`NotFound`, :class:`PermissionDenied` (not the owner nor
        a continuation of it), or :class:`IntegrityError` when the file is no
        receipt at all (garbage: its owner is unknown, so this comes first) or,
        when ``verified``, the receipt does not match its own hash or seal.
        """
        try:
            receipt = self._load(process_id)
        except (ValidationError, ValueError) as exc:
            if isinstance(exc, ProcessTableError):
                raise
            # Not the parser's message: it quotes the file, which is not the caller's to see.
            raise IntegrityError(
                f"the receipt of {process_id} is unreadable: not a receipt (changed outside sbx)"
            ) from None
        if not self.continuations.may_read(session_id, receipt.owner_session_id):
            raise PermissionDenied(f"session may not read the receipt of {process_id}")
        if verified and not self.intact(receipt, process_id):
            raise IntegrityError(f"receipt of {process_id} was modified")
        return receipt

    def intact(self, receipt: Receipt, process_id: str) -> bool:
        """True when ``receipt`` is the one of ``process_id``, matches its hash and (with a
        sealer) carries a valid seal."""
        if receipt.process_id != process_id or not receipt.is_intact():
            return False
        return self.sealer is None or (
            self.sealer.check(receipt.mac, RECEIPT_PURPOSE, receipt.sha256) == "ok"
        )

    def all_receipts(self) -> Iterator[tuple[str, Receipt | None]]:
        """``(process id from the file name, receipt or None when unreadable)``, by name."""
        for name in sorted(os.listdir(self.dir)):
            if not name.endswith(".json") or name.startswith("."):
                continue
            try:
                yield name[: -len(".json")], self._load(name[: -len(".json")])
            except (NotFound, UnsafePath, ValidationError, ValueError, OSError):
                yield name[: -len(".json")], None

    def list(self, session_id: str) -> list[Receipt]:
        """Intact receipts ``session_id`` may read, oldest completion first.

        Like :meth:`read`, only receipts that check on their own (hash, seal, file name):
        a forged or edited one is left out, and :meth:`verify` reports it.
        """
        readable = [
            r
            for name, r in self.all_receipts()
            if r is not None
            and self.continuations.may_read(session_id, r.owner_session_id)
            and self.intact(r, name)
        ]
        return sorted(readable, key=lambda r: (r.ended_at, r.seq))

    def verify(self, session_ids: Iterable[str]) -> builtins.list[str]:
        """Integrity problems in the receipts of ``session_ids`` (empty list: all good).

        Detects an edited receipt (hash or seal mismatch), a moved/swapped file
        (name is not its process id), a deleted one (a gap in the session's
        chain not explained by retention, or a missing head), a reordered one
        (a predecessor hash that does not match) and a deleted or changed chain
        head; see :mod:`process_registry.receipt_verify` for what that proves.
        """
        return verify_sessions(self, session_ids)

    def sessions_readable_by(self, session_id: str) -> builtins.list[str]:
        """``session_id`` and every session it continues (whose receipts it may verify)."""
        return [session_id, *self.continuations.ancestors(session_id)]

    def now(self) -> float:
        return self.clock()


__all__ = ["AlreadyExists", "ReceiptStore", "bound_text", "excerpt"]
