"""An answer's ``error`` text, redacted before the answer leaves the worker.

Error texts often repeat what the caller sent -- a missing ``workdir``, a file path,
an unknown tool's name, an argument's name, a process id -- or what an exception said
about it, so a secret in the arguments came back in clear in the answer, in the
ledger that holds it and in a platform's transcript. Output is redacted by the tool
that produced it (and only with ``SBX_REDACT_OUTPUT``); an error text is not output,
so, like a log line, it is redacted whatever that setting says.

Contract: :func:`redact_error` returns ``answer`` itself unless it is a JSON object
whose top-level ``error`` is a string the redactor changes; then the same object
with that string redacted. No other field is touched: ids, tokens and digests in an
answer are the caller's to use.
"""

from __future__ import annotations

import json
import re

from process_registry.redact import redact_text
from registry.results import to_json

_ERROR_TEXT = re.compile(r'"error"\s*:\s*"')


def redact_error(answer: str) -> str:
    """``answer`` with its ``error`` text redacted (see the module docstring)."""
    if not _ERROR_TEXT.search(answer):
        return answer  # no error text (most answers say "error": null): nothing to parse
    try:
        payload = json.loads(answer)
    except ValueError:
        return answer
    if not isinstance(payload, dict) or not isinstance(payload.get("error"), str):
        return answer
    error: str = payload["error"]
    redacted = redact_text(error)
    if redacted == error:
        return answer
    payload["error"] = redacted
    return to_json(payload)
