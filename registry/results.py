"""Tool results as the model sees them: always a JSON string, never a traceback."""

from __future__ import annotations

import json
from typing import Any


def to_json(payload: Any) -> str:
    """Serialise a tool result; non-JSON values are stringified rather than raising."""
    return json.dumps(payload, ensure_ascii=False, default=str)


def tool_error(message: str, **fields: Any) -> str:
    """A JSON error result: ``{"error": message, ...fields}``."""
    return to_json({"error": message, **fields})
