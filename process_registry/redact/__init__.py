"""Secret redaction for command lines, live output, receipts, checkpoints and logs.

Public contract:

* :func:`redact_text` replaces every secret it recognises with ``[REDACTED]``,
  or, for vendor keys, keeps the vendor's fixed prefix for readability:
  ``sk-proj-...[REDACTED]``, ``ghp_...[REDACTED]``, ``eyJ...[REDACTED]``.
  Everything else stays byte-identical.  Redacting twice equals redacting once.
  Time is linear in the input, whatever it is.
* :class:`StreamRedactor` does the same over a stream of chunks: a secret split
  across chunks is still redacted, and the concatenation of everything it
  returns equals ``redact_text`` of the whole input.  Memory is bounded.
* :func:`redact_bytes` and :func:`redact_mapping` are conveniences on top.

The package is a leaf: it imports nothing else of sbx.  One module per family
of rules -- :mod:`.providers` and :mod:`.cloud` (vendor-prefixed tokens, found
through :mod:`.vendors`), :mod:`.bots`, :mod:`.sbx_tokens`, :mod:`.urls`,
:mod:`.key_value` (with :mod:`.keys` and :mod:`.values`), :mod:`.cli_args`,
:mod:`.private_keys`, :mod:`.bearer`, :mod:`.hashes` -- each exporting
``RULES``, collected in :mod:`.rules`; :mod:`.engine` scans, :mod:`.stream`
streams, :mod:`.separators` joins tokens split on purpose, :mod:`.glue` says what
may join a vendor prefix to the run before it.  What is redacted,
what is left alone, the limits and how to add a rule: ``docs/redaction.md``.
"""

from .base import PLACEHOLDER
from .engine import redact_bytes, redact_mapping, redact_text, redaction_counts
from .keys import key_names_secret
from .stream import HOLD, StreamRedactor

__all__ = [
    "HOLD", "PLACEHOLDER", "StreamRedactor", "key_names_secret", "redact_bytes", "redact_mapping",
    "redact_text", "redaction_counts",
]
