"""The scan: every detector over the text, candidates in order, verified spans replaced.

Spans are accepted left to right, first candidate first; a candidate inside
an accepted span (or its kept prefix) is skipped.  Each detector is one
literal-prefixed ``finditer`` pass, so skipping to candidates runs at C speed
and the work in Python is proportional to the candidates, not the text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypeVar, cast

from .base import PLACEHOLDER
from .keys import key_names_secret
from .rules import PASSES
from .values import is_non_secret_value
from .vendors import value_replacement

_VERIFIERS: Final = tuple(r.verify for r in PASSES)
_DETECTORS: Final = tuple(r.detector for r in PASSES)
# Candidates are encoded as position << _SHIFT | rule index: one int sort orders them.
_SHIFT: Final = max(1, (len(PASSES) - 1).bit_length())
_MASK: Final = (1 << _SHIFT) - 1
# Spans replaced so far in this process, by rule index: what metrics export. A lost
# increment between threads is tolerable for a metric; a lock per hit is not.
_HITS: Final = [0] * len(PASSES)


def scan(text: str, start: int, limit: int) -> tuple[list[str], int]:
    """Redact ``text[start:]`` up to ``limit``; return the pieces and where they end.

    A span that starts before ``limit`` is taken whole, so the returned end is
    ``max(limit, last span end)``.  Candidates at or past ``limit`` are left
    for a later call.
    """
    found: list[int] = []
    for index, detector in enumerate(_DETECTORS):
        found.extend(m.start() << _SHIFT | index for m in detector.finditer(text, start))
    found.sort()
    pieces: list[str] = []
    pos = start
    for code in found:
        p = code >> _SHIFT
        if p >= limit:
            break
        if p < pos:  # inside a span already replaced (or its kept prefix)
            continue
        hit = _VERIFIERS[code & _MASK](text, p)
        if hit is None or hit[0] < pos:
            continue
        s, e, replacement = hit
        _HITS[code & _MASK] += 1
        pieces.append(text[pos:s])
        pieces.append(replacement)
        pos = e
    end = max(pos, limit)
    pieces.append(text[pos:end])
    return pieces, end


def redaction_counts() -> dict[str, int]:
    """Secrets replaced in this process since it started, by rule name."""
    counts: dict[str, int] = {}
    for rule, hits in zip(PASSES, _HITS, strict=True):
        counts[rule.name] = counts.get(rule.name, 0) + hits
    return counts


def redact_text(text: str) -> str:
    """Return ``text`` with every recognised secret replaced (see the package docstring).

    Idempotent: ``redact_text(redact_text(t)) == redact_text(t)``; its only side effect
    counts the replaced spans (:func:`redaction_counts`).
    Runs in time linear in ``len(text)`` whatever the input.
    """
    pieces, _ = scan(text, 0, len(text))
    return pieces[0] if len(pieces) == 1 else "".join(pieces)


def redact_bytes(data: bytes) -> bytes:
    """``redact_text`` for bytes.

    Decodes UTF-8 with ``surrogateescape`` and encodes back the same way, so
    bytes that are not valid UTF-8 (binary output, latin-1 files) come back
    unchanged; only recognised (ASCII) secrets are replaced.
    """
    return redact_text(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


_J = TypeVar("_J")


def redact_mapping(obj: _J) -> _J:
    """Return a redacted copy of a JSON-like value (dicts, lists, tuples, scalars).

    Every string (keys included) goes through :func:`redact_text`.  Under a key
    that names a secret (``password``, ``api_key``, ``client_secret``,
    ``Authorization``, ... see :func:`~.keys.key_names_secret`) every string
    and number below it becomes a placeholder, except references and
    booleans/null.  The input is not modified.
    """
    return cast(_J, _walk(obj, False))


def _walk(obj: object, secret: bool) -> object:
    if isinstance(obj, str):
        if secret and not is_non_secret_value(obj):
            return value_replacement(obj)
        return redact_text(obj)
    if isinstance(obj, bytes | bytearray):
        return PLACEHOLDER.encode() if secret and obj else redact_bytes(bytes(obj))
    if isinstance(obj, Mapping):
        return {
            (redact_text(k) if isinstance(k, str) else k): _walk(
                v, secret or (isinstance(k, str) and key_names_secret(k))
            )
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [_walk(v, secret) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_walk(v, secret) for v in obj)
    if secret and isinstance(obj, int | float) and not isinstance(obj, bool):
        return PLACEHOLDER
    return obj
